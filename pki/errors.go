package pki

import "errors"

var (
	// ErrInvalidRole: a string that is no role name (ParseRole), or a role
	// a certificate cannot carry (CreateClient).
	ErrInvalidRole = errors.New("pki: invalid role")
	// ErrInvalidName: a node id or client name that ValidateName refuses.
	ErrInvalidName = errors.New("pki: invalid name")
	// ErrInvalidHost: a host for a node certificate that is neither an IP
	// address nor a DNS name.
	ErrInvalidHost = errors.New("pki: invalid host")
	// ErrInvalidOptions: Files or Options that cannot be used (a key
	// without its certificate, a validity that is not positive, …).
	ErrInvalidOptions = errors.New("pki: invalid options")
	// ErrExists: a Create function would overwrite a file and was not
	// told to (Options.Force). The error names the file; nothing was
	// written.
	ErrExists = errors.New("pki: file exists")
	// ErrInvalidFile: a certificate, key or CA file that is not what it
	// must be (not PEM, a key that does not match its certificate, a
	// CA bundle with a certificate that is no CA). The error names the
	// file. A missing file wraps fs.ErrNotExist instead.
	ErrInvalidFile = errors.New("pki: invalid file")
	// ErrNoCertificate: a handshake needs this side's certificate, and the
	// Reloader's Files have none.
	ErrNoCertificate = errors.New("pki: no certificate configured")
	// ErrNotNode: a peer handshake met a certificate without a node
	// identity (NodeID).
	ErrNotNode = errors.New("pki: not a node certificate")
)
