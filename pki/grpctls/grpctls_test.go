package grpctls_test

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cutkv/cutkv/pki"
	"github.com/cutkv/cutkv/pki/grpctls"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

const year = 365 * 24 * time.Hour

// must returns v, failing t if err is not nil: must(t)(f()).
func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func bundle(t *testing.T, path string, cas ...pki.Files) {
	t.Helper()
	var all []byte
	for _, f := range cas {
		all = append(all, must[[]byte](t)(os.ReadFile(f.CA))...)
	}
	if err := os.WriteFile(path, all, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCARotation: a gRPC client made with Client dials with the newest CA
// of its Reloader; credentials.NewTLS of one ClientConfig keeps the CA it
// was made with.
func TestCARotation(t *testing.T) {
	dir := t.TempDir()
	o := pki.Options{ValidFor: year}
	ca1 := must[pki.Files](t)(pki.CreateCA(filepath.Join(dir, "ca1"), "CA 1", pki.Options{ValidFor: 2 * year}))
	ca2 := must[pki.Files](t)(pki.CreateCA(filepath.Join(dir, "ca2"), "CA 2", pki.Options{ValidFor: 2 * year}))
	node := must[pki.Files](t)(pki.CreateNode(dir, filepath.Join(dir, "ca1"), "n1", []string{"127.0.0.1"}, o))
	alice := must[pki.Files](t)(pki.CreateClient(dir, filepath.Join(dir, "ca1"), "alice", pki.RoleWrite, o))

	sr := must[*pki.Reloader](t)(pki.NewReloader(node, nil))
	var mu sync.Mutex
	var roles []pki.Role
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(sr.ServerConfig(tls.RequireAndVerifyClientCert))),
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			p, _ := peer.FromContext(ctx)
			ti, _ := p.AuthInfo.(credentials.TLSInfo)
			role, ok := pki.RoleOf(ti.State.PeerCertificates[0])
			if !ok {
				return nil, status.Error(codes.PermissionDenied, "no role")
			}
			mu.Lock()
			roles = append(roles, role)
			mu.Unlock()
			return h(ctx, req)
		}))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	ln := must[net.Listener](t)(net.Listen("tcp", "127.0.0.1:0"))
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)

	check := func(creds credentials.TransportCredentials) error {
		t.Helper()
		cc := must[*grpc.ClientConn](t)(grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(creds)))
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}

	clientCA := filepath.Join(dir, "client-ca.crt")
	bundle(t, clientCA, ca1)
	cr := must[*pki.Reloader](t)(pki.NewReloader(pki.Files{Cert: alice.Cert, Key: alice.Key, CA: clientCA}, nil))
	creds := grpctls.Client(cr.ClientConfig)
	fixed := credentials.NewTLS(cr.ClientConfig())
	for name, c := range map[string]credentials.TransportCredentials{"Client": creds, "NewTLS": fixed} {
		if err := check(c); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	mu.Lock()
	if len(roles) != 2 || roles[0] != pki.RoleWrite {
		t.Errorf("server saw roles %v", roles)
	}
	mu.Unlock()

	// The server moves to a CA 2 certificate (alice's CA stays trusted).
	if _, err := pki.CreateNode(dir, filepath.Join(dir, "ca2"), "n1", []string{"127.0.0.1"}, pki.Options{ValidFor: year, Force: true}); err != nil {
		t.Fatal(err)
	}
	if err := sr.Reload(); err != nil {
		t.Fatal(err)
	}
	if err := check(creds); status.Code(err) != codes.Unavailable {
		t.Fatalf("before the client trusts CA 2: %v", err)
	}
	bundle(t, clientCA, ca1, ca2)
	if err := cr.Reload(); err != nil {
		t.Fatal(err)
	}
	if err := check(creds); err != nil {
		t.Errorf("Client after the client's reload: %v", err)
	}
	if err := check(fixed); status.Code(err) != codes.Unavailable {
		t.Errorf("NewTLS of an old ClientConfig: %v, want Unavailable", err)
	}
	if _, _, err := creds.ServerHandshake(nil); err == nil {
		t.Error("client credentials accepted a connection")
	}
}
