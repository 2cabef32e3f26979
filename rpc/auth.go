package rpc

import (
	"context"
	"crypto/x509"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/reflection"

	"github.com/cutkv/cutkv/pki"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/internalrpc"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
	"github.com/cutkv/cutkv/topology"
)

// Who may call what (docs/cli.md, "Roles"). A node has two listeners:
//
//   - the client listener serves KV, Cluster, health and reflection. With
//     client certificates configured (a trusted CA), a call needs a
//     certificate whose role (package pki) includes the method's role;
//     without one a client reaches only health. Without a CA every client
//     is admin, as in etcd without auth.
//   - the peer listener serves the node-to-node services, each to members
//     only: with peer TLS the certificate must name a member of the
//     layout (pki.NodeID), and a raft batch's sender must be that member.
//     Every call but Bootstrap carries the cluster id, checked against
//     this node's. The client services appear there too, renamed
//     (forwardService), for calls a node forwards for a client: those
//     carry the client's role and hop count in metadata, trusted only
//     because a member sent them, and the role is checked as on the
//     client listener. A node never lends its own identity to a client.
//
// Unknown methods are refused on both listeners: every registered method
// must be in clientRoles or be a peer service (TestEveryMethodHasARole).

// Metadata keys between nodes.
const (
	forwardedKey = "cutkv-forwarded"
	roleKey      = "cutkv-role"
	clusterIDKey = "cutkv-cluster-id"
)

// Full method names of the public services' prefixes.
const (
	kvService        = "cutkv.kv.v1.KV"
	clusterService   = "cutkv.kv.v1.Cluster"
	healthService    = "grpc.health.v1.Health"
	reflectV1        = "grpc.reflection.v1.ServerReflection"
	reflectV1Alpha   = "grpc.reflection.v1alpha.ServerReflection"
	bootstrapService = "cutkv.internal.v1.Bootstrap"
	// forwardPrefix names the peer listener's copies of the client
	// services: "/cutkv.forward.cutkv.kv.v1.KV/Put".
	forwardPrefix = "cutkv.forward."
)

// clientRoles is the role each client method needs. RoleNone: anyone,
// also without a certificate. A Txn needs write unless it only reads
// (txnRole).
var clientRoles = map[string]pki.Role{
	"/" + kvService + "/Get":    pki.RoleRead,
	"/" + kvService + "/Scan":   pki.RoleRead,
	"/" + kvService + "/Put":    pki.RoleWrite,
	"/" + kvService + "/Delete": pki.RoleWrite,
	"/" + kvService + "/Txn":    pki.RoleWrite, // read for read-only ones

	"/" + clusterService + "/Members":        pki.RoleRead,
	"/" + clusterService + "/Status":         pki.RoleRead,
	"/" + clusterService + "/Routing":        pki.RoleRead,
	"/" + clusterService + "/ListCuts":       pki.RoleRead,
	"/" + clusterService + "/GetCut":         pki.RoleRead,
	"/" + clusterService + "/ListSnapshots":  pki.RoleRead,
	"/" + clusterService + "/GetSnapshot":    pki.RoleRead,
	"/" + clusterService + "/CreateCut":      pki.RoleAdmin,
	"/" + clusterService + "/Check":          pki.RoleAdmin,
	"/" + clusterService + "/Checkpoint":     pki.RoleAdmin,
	"/" + clusterService + "/CreateSnapshot": pki.RoleAdmin,
	"/" + clusterService + "/CheckSnapshot":  pki.RoleAdmin,
	"/" + clusterService + "/DeleteSnapshot": pki.RoleAdmin,
	"/" + clusterService + "/PruneSnapshots": pki.RoleAdmin,

	"/" + healthService + "/Check": pki.RoleNone,
	"/" + healthService + "/Watch": pki.RoleNone,
	"/" + healthService + "/List":  pki.RoleNone,

	"/" + reflectV1 + "/ServerReflectionInfo":      pki.RoleRead,
	"/" + reflectV1Alpha + "/ServerReflectionInfo": pki.RoleRead,
}

// ClientRole returns the role the client method needs (req, when known,
// refines a Txn) and whether the method is one clients may call at all.
func ClientRole(method string, req any) (pki.Role, bool) {
	r, ok := clientRoles[method]
	if ok && method == "/"+kvService+"/Txn" {
		if t, isTxn := req.(*kvpb.TxnRequest); isTxn {
			r = txnRole(t)
		}
	}
	return r, ok
}

// txnRole is read for a transaction whose branches only read, else write.
func txnRole(t *kvpb.TxnRequest) pki.Role {
	for _, ops := range [][]*kvpb.RequestOp{t.GetSuccess(), t.GetFailure()} {
		for _, op := range ops {
			switch op.GetRequest().(type) {
			case *kvpb.RequestOp_Get, *kvpb.RequestOp_Scan:
			default:
				return pki.RoleWrite
			}
		}
	}
	return pki.RoleRead
}

// IsPeerMethod says whether method belongs on the peer listener: a
// node-to-node service, or a forwarded copy of a client one.
func IsPeerMethod(method string) bool {
	return strings.HasPrefix(method, "/cutkv.internal.v1.") || strings.HasPrefix(method, "/"+forwardPrefix)
}

// caller is who a request is served for, set by the listeners'
// interceptors.
type caller struct {
	role pki.Role
	hops int    // times the request was forwarded
	peer string // the authenticated member that sent it ("" on the client listener, or without peer TLS)
	set  bool
}

type callerKey struct{}

func withCaller(ctx context.Context, c caller) context.Context {
	c.set = true
	return context.WithValue(ctx, callerKey{}, c)
}

// callerOf returns the request's caller. A context that went through no
// interceptor is the node's own work (background loops, in-process
// calls, tests): it forwards as admin, since no client stands behind it.
func callerOf(ctx context.Context) caller {
	if c, ok := ctx.Value(callerKey{}).(caller); ok {
		return c
	}
	return caller{role: pki.RoleAdmin}
}

// forwardedHops returns how many times the request was forwarded.
func forwardedHops(ctx context.Context) int { return callerOf(ctx).hops }

// forwardCtx marks the outgoing copy of a request with the caller's role
// and one more hop. It builds the metadata afresh: nothing the client
// sent is passed on.
func forwardCtx(ctx context.Context) context.Context {
	c := callerOf(ctx)
	return metadata.NewOutgoingContext(ctx, metadata.Pairs(roleKey, c.role.String(), forwardedKey, strconv.Itoa(c.hops+1)))
}

// permissionDenied says which role a method needs.
func permissionDenied(method string, need, have pki.Role, certified bool) error {
	if !certified {
		return toStatus(fmt.Errorf("%w: %s needs a client certificate with role %s (or higher); this connection presented none (pass --cert and --key)", ErrPermissionDenied, method, need), "")
	}
	return toStatus(fmt.Errorf("%w: %s needs role %s (or higher); the caller has role %s", ErrPermissionDenied, method, need, have), "")
}

// ClientAuth checks the client listener's calls. With requireCerts (a
// trusted CA is configured) the role comes from the verified client
// certificate; without, every caller is admin.
type ClientAuth struct {
	RequireCerts bool
}

func (a ClientAuth) authorize(ctx context.Context, method string, req any) (context.Context, error) {
	need, ok := ClientRole(method, req)
	if !ok {
		return nil, toStatus(fmt.Errorf("%w: %s is not served on the client port", ErrUnimplemented, method), "")
	}
	role, certified := pki.RoleAdmin, true
	if a.RequireCerts {
		role, certified = pki.RoleNone, false
		if cert := peerCert(ctx); cert != nil {
			certified = true
			if r, ok := pki.RoleOf(cert); ok {
				role = r
			}
		}
	}
	if !role.Includes(need) {
		return nil, permissionDenied(method, need, role, certified)
	}
	return withCaller(ctx, caller{role: role}), nil
}

// Unary is the client listener's unary interceptor.
func (a ClientAuth) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, err := a.authorize(ctx, calledMethod(ctx, info.FullMethod), req)
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// Stream is the client listener's stream interceptor. A streaming
// method's role does not depend on its request.
func (a ClientAuth) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, err := a.authorize(ss.Context(), info.FullMethod, nil)
		if err != nil {
			return err
		}
		return handler(srv, &ctxStream{ServerStream: ss, ctx: ctx})
	}
}

// PeerAuth checks the peer listener's calls: the sender is a member, the
// call is for this cluster, a forwarded call's role suffices.
type PeerAuth struct {
	// Layout names the members; ClusterID is filled in once known (a
	// node asking for it at bootstrap serves no peer calls yet).
	Layout *topology.Layout
	// RequireCerts: peer TLS is on, so a certificate naming a member is
	// required. Off only with --insecure-peer or on loopback.
	RequireCerts bool
	// Metrics count the calls refused for who sent them (nil: none).
	Metrics *NodeMetrics
}

func (a PeerAuth) authorize(ctx context.Context, method string, req any) (context.Context, error) {
	if !IsPeerMethod(method) {
		return nil, toStatus(fmt.Errorf("%w: %s is not served on the peer port (clients use the client port)", ErrUnimplemented, method), "")
	}
	var who string
	if a.RequireCerts {
		cert := peerCert(ctx)
		if cert == nil {
			a.Metrics.PeerRejected(peerRejectNoCert)
			return nil, toStatus(fmt.Errorf("%w: peer calls need a member certificate", ErrUnauthenticated), "")
		}
		id, ok := pki.NodeID(cert)
		if _, member := a.Layout.Member(id); !ok || !member {
			a.Metrics.PeerRejected(peerRejectNotMember)
			return nil, toStatus(fmt.Errorf("%w: the peer certificate names %q, not a member of this cluster", ErrPermissionDenied, id), "")
		}
		who = id
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if !strings.HasPrefix(method, "/"+bootstrapService+"/") {
		if err := a.checkCluster(md); err != nil {
			a.Metrics.PeerRejected(peerRejectCluster)
			return nil, err
		}
	}
	c := caller{role: pki.RoleAdmin, peer: who}
	if orig, ok := strings.CutPrefix(method, "/"+forwardPrefix); ok {
		// A client's call forwarded by a member: the member vouches for
		// the client's role and the hop count.
		orig = "/" + orig
		need, ok := ClientRole(orig, req)
		if !ok {
			return nil, toStatus(fmt.Errorf("%w: %s forwards no client method", ErrUnimplemented, method), "")
		}
		role, err := pki.ParseRole(lastValue(md, roleKey))
		if err != nil {
			return nil, toStatus(fmt.Errorf("%w: forwarded call without a valid %s: %v", ErrInvalidArgument, roleKey, err), "")
		}
		hops, err := strconv.Atoi(lastValue(md, forwardedKey))
		if err != nil || hops < 1 || hops > maxHops {
			return nil, toStatus(fmt.Errorf("%w: forwarded call with %s %q, not 1..%d", ErrInvalidArgument, forwardedKey, lastValue(md, forwardedKey), maxHops), "")
		}
		if !role.Includes(need) {
			return nil, permissionDenied(orig, need, role, true)
		}
		c.role, c.hops = role, hops
	}
	return withCaller(ctx, c), nil
}

func (a PeerAuth) checkCluster(md metadata.MD) error {
	got := lastValue(md, clusterIDKey)
	id, err := topology.ParseClusterID(got)
	if err != nil {
		return toStatus(fmt.Errorf("%w: peer call without a valid cluster id (%q)", ErrFailedPrecondition, got), "")
	}
	if id != a.Layout.ClusterID {
		return toStatus(fmt.Errorf("%w: the caller is in cluster %s, this node is in %s",
			ErrWrongCluster, topology.FormatClusterID(id), topology.FormatClusterID(a.Layout.ClusterID)), "")
	}
	return nil
}

// Unary is the peer listener's unary interceptor. The method is read
// from the call (grpc.Method), not from info: the generated handlers of a
// service registered under another name (forwardService) report their
// original name there.
func (a PeerAuth) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, err := a.authorize(ctx, calledMethod(ctx, info.FullMethod), req)
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// Stream is the peer listener's stream interceptor.
func (a PeerAuth) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, err := a.authorize(ss.Context(), info.FullMethod, nil)
		if err != nil {
			return err
		}
		return handler(srv, &ctxStream{ServerStream: ss, ctx: ctx})
	}
}

// calledMethod is the full method the call named on the wire.
func calledMethod(ctx context.Context, fallback string) string {
	if m, ok := grpc.Method(ctx); ok {
		return m
	}
	return fallback
}

// authenticatedPeer is the member id the peer listener authenticated for
// this call, "" without peer TLS.
func authenticatedPeer(ctx context.Context) string { return callerOf(ctx).peer }

func lastValue(md metadata.MD, key string) string {
	v := md.Get(key)
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// peerCert returns the verified certificate the other end presented, nil
// if none (or not over TLS).
func peerCert(ctx context.Context) *x509.Certificate {
	p, ok := grpcpeer.FromContext(ctx)
	if !ok || p.AuthInfo == nil {
		return nil
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.PeerCertificates) == 0 {
		return nil
	}
	return ti.State.PeerCertificates[0]
}

// ctxStream is a server stream with the interceptor's context.
type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }

// clusterIDInterceptors put the cluster id on every outgoing peer call.
func clusterIDInterceptors(id func() uint64) []grpc.DialOption {
	add := func(ctx context.Context) context.Context {
		return metadata.AppendToOutgoingContext(ctx, clusterIDKey, topology.FormatClusterID(id()))
	}
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(add(ctx), method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(add(ctx), desc, cc, method, opts...)
		}),
	}
}

// forwardService is the copy of a client service registered on the peer
// listener, for calls forwarded by members.
func forwardService(desc grpc.ServiceDesc) *grpc.ServiceDesc {
	desc.ServiceName = forwardPrefix + desc.ServiceName
	return &desc
}

// forwardConn sends a client service's calls to a peer's forwarded copy
// of it.
type forwardConn struct{ cc grpc.ClientConnInterface }

func forwardMethod(method string) string {
	return "/" + forwardPrefix + strings.TrimPrefix(method, "/")
}

func (f forwardConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	return f.cc.Invoke(ctx, forwardMethod(method), args, reply, opts...)
}

func (f forwardConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return f.cc.NewStream(ctx, desc, forwardMethod(method), opts...)
}

// RegisterClientServices registers on s everything the client listener
// serves: KV, Cluster, the health service hs, and server reflection.
func RegisterClientServices(s *grpc.Server, n *Node, hs healthpb.HealthServer) {
	kvrpc.RegisterKVServer(s, NewKVServer(n))
	kvrpc.RegisterClusterServer(s, NewClusterServer(n))
	healthpb.RegisterHealthServer(s, hs)
	reflection.Register(s)
}

// RegisterPeerServices registers on s the node-to-node services and the
// forwarded copies of the client services.
func RegisterPeerServices(s *grpc.Server, n *Node, raft *RaftServer) {
	internalrpc.RegisterRaftServer(s, raft)
	internalrpc.RegisterParticipantServer(s, NewParticipantServer(n))
	internalrpc.RegisterCutServiceServer(s, NewCutServer(n))
	internalrpc.RegisterSnapshotPartitionsServer(s, NewSnapshotPartitionsServer(n))
	internalrpc.RegisterBootstrapServer(s, BootstrapServer{Layout: n.Layout})
	s.RegisterService(forwardService(kvrpc.KV_ServiceDesc), NewKVServer(n))
	s.RegisterService(forwardService(kvrpc.Cluster_ServiceDesc), NewClusterServer(n))
}

// BootstrapServer tells a member starting for the first time the
// cluster's id, if it was bootstrapped from the same settings.
type BootstrapServer struct {
	internalrpc.UnimplementedBootstrapServer
	Layout *topology.Layout
}

// ClusterID answers the cluster id to a member with the same digest.
func (s BootstrapServer) ClusterID(ctx context.Context, req *internalpb.ClusterIDRequest) (*internalpb.ClusterIDResponse, error) {
	if _, ok := s.Layout.Member(req.GetMember()); !ok {
		return nil, toStatus(fmt.Errorf("%w: %q is not a member of this cluster", ErrPermissionDenied, req.GetMember()), "")
	}
	if who := authenticatedPeer(ctx); who != "" && who != req.GetMember() {
		return nil, toStatus(fmt.Errorf("%w: member %s asked for member %s", ErrPermissionDenied, who, req.GetMember()), "")
	}
	if s.Layout.Digest == 0 || req.GetDigest() != s.Layout.Digest {
		return nil, toStatus(fmt.Errorf("%w: this node's cluster was bootstrapped from other settings (--initial-cluster, --initial-cluster-token, --partitions, or another restore): digest %016x, asked for %016x",
			ErrFailedPrecondition, s.Layout.Digest, req.GetDigest()), "")
	}
	return &internalpb.ClusterIDResponse{ClusterId: s.Layout.ClusterID}, nil
}
