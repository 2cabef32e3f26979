// Package grpctls gives gRPC the TLS configs of a pki.Reloader so that
// reloaded certificates and CAs take effect for new connections.
//
// A server needs nothing of it: credentials.NewTLS(r.ServerConfig(…)) is
// reload-aware already, since each handshake gets its config from
// GetConfigForClient. A client is different: credentials.NewTLS keeps one
// tls.Config, and pki.Reloader.ClientConfig fixes the CA pool in the
// config it returns (see its comment for why). Client takes a new config
// for every handshake instead:
//
//	grpc.NewClient(addr, grpc.WithTransportCredentials(grpctls.Client(r.ClientConfig)))
//	grpc.NewClient(peer, grpc.WithTransportCredentials(grpctls.Client(r.PeerClientConfig)))
package grpctls

import (
	"context"
	"crypto/tls"
	"errors"
	"net"

	"google.golang.org/grpc/credentials"
)

// errServerSide: client credentials were given to a server.
var errServerSide = errors.New("grpctls: client credentials cannot accept connections")

// Client returns client transport credentials that call config for each
// handshake and then do what credentials.NewTLS does with that config:
// the server name is the host of the dialed authority, and HTTP/2 is
// negotiated by ALPN. config must return a new config each call (the
// Reloader's ClientConfig and PeerClientConfig do); it is called on the
// dialing goroutine and may do the Reloader's change check (file stats).
func Client(config func() *tls.Config) credentials.TransportCredentials {
	return &client{config: config}
}

type client struct {
	config func() *tls.Config
}

func (c *client) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return credentials.NewTLS(c.config()).ClientHandshake(ctx, authority, conn)
}

func (c *client) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errServerSide
}

func (c *client) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls"}
}

func (c *client) Clone() credentials.TransportCredentials { return &client{config: c.config} }

// OverrideServerName is deprecated in gRPC and not supported: the server
// name is always the dialed host (grpc.WithAuthority changes it).
func (c *client) OverrideServerName(string) error {
	return errors.New("grpctls: OverrideServerName is not supported; use grpc.WithAuthority")
}
