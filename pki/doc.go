// Package pki is cutkv's public key infrastructure (DESIGN.md, "Trust"):
// who a certificate says it is, loading certificates for TLS so that new
// ones take effect without a restart, and making a cluster's CA and the
// certificates of its nodes and clients.
//
// # The idea
//
// A cluster has its own CA. Nodes and clients trust that CA only, never
// the system's roots: whoever holds a certificate from it is a member or
// a client of the cluster, and what it may do is written in the
// certificate, which the CA signed. A node therefore needs no user
// database: the TLS handshake proves the identity, NodeID or RoleOf reads
// it, and the service checks it against what the method needs.
//
// The peer listener (raft, 2PC, cuts, snapshots) takes only node
// certificates (PeerServerConfig); the client listener takes client
// certificates, and a role decides which methods a client may call
// (RoleRead < RoleWrite < RoleAdmin, Role.Includes). A node dials its peers
// with its node certificate (PeerClientConfig), which therefore has both
// the ServerAuth and the ClientAuth extended key usage; a client
// certificate has ClientAuth only and cannot serve.
//
// # Identity
//
// The encoding below is part of cutkv's interface: certificates made with
// other tools (openssl, cfssl, a corporate CA) work if they follow it.
//
//   - A node certificate carries exactly one identity, the URI SAN
//     cutkv://node/<id>, plus DNS and IP SANs for the hosts it serves on
//     and the extended key usages ServerAuth and ClientAuth. Its Subject CN
//     is the id too, for humans; NodeID never reads it, so a client
//     certificate whose CN is "n1" is not node n1. A node certificate has
//     no role, whatever its OU says.
//   - A client certificate carries its role as the URI SAN
//     cutkv://role/<role> and as Subject OU <role>, where <role> is read,
//     write or admin. Its Subject CN is the client's name (for logs and
//     audit). RoleOf reads the URI, else the OU (for CAs that cannot write
//     URI SANs); OUs that are no role name are ignored. Its extended key
//     usage is ClientAuth.
//   - Node ids and client names are 1 to 64 bytes of [A-Za-z0-9._-]
//     (ValidateName), so they need no escaping anywhere.
//   - Anything ambiguous is refused, not read generously: two different
//     node ids, two different roles (URI and OU counted together), a node
//     URI and a role, or any URI with the cutkv scheme that is not exactly
//     one of the two forms (a port, a query, escapes, another host, a bad
//     id or role). Such a certificate has no node id and no role. URIs of
//     other schemes (spiffe://…) are ignored.
//
// # Loading and reloading
//
// A Reloader loads Files (a certificate with its key, a CA bundle, or
// both) and hands out tls.Configs that use the newest successful load
// for each new handshake; connections already open keep what they
// negotiated. Files are reloaded by Reload — the node calls it on SIGHUP
// — and by the handshakes themselves, which stat the files at most once a
// second and reload when one changed (size, modification time or inode:
// an atomic rename, as a Kubernetes secret update does, is seen). A
// failed load keeps the old material and is logged, or returned by
// Reload; a certificate that has expired is loaded but logged as an
// error. A certificate and its key replaced one after the other may be
// seen half done: that load fails (a key that does not match), is
// logged, and the next check, a second later, loads the pair. Replacing
// a directory with one rename (a symlink swap) makes that rare.
//
// Servers pick up a new CA at once (GetConfigForClient). A client's
// tls.Config holds the CA pool it was made with, because only crypto/tls's
// own verification knows the dialed host name to check; a dialer that
// takes a new ClientConfig per connection (pki/grpctls) picks the new CA up
// for new connections.
//
// # Making certificates
//
// CreateCA, CreateNode and CreateClient write PEM files, ECDSA P-256 keys
// in PKCS #8 with mode 0600, certificates with 0644, each file
// crash-atomically, the key before its certificate. They refuse to
// overwrite a file unless told to (Options.Force). Serial numbers are
// random 128-bit numbers; a certificate is valid from a minute before it
// was made, for clocks a little behind. Layout, for a CA in dir C and
// certificates in dir D:
//
//	C/ca.crt, C/ca.key          CreateCA
//	D/<id>.crt, D/<id>.key      CreateNode (id is the node id)
//	D/<name>.crt, D/<name>.key  CreateClient
//
// kvctl cert create-ca, create-node and create-client are the commands
// over these.
package pki
