package server_test

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
	"github.com/cutkv/cutkv/server"
)

// TestAdvertisedAddresses: a node that listens on 0.0.0.0 (every port)
// announces its --advertise-* values: the other members' view of it over
// gossip (Cluster.Members) shows them, not the listen addresses, and an
// --advertise-gossip host name is announced as the IP address it resolves
// to. A restart whose --advertise-peer is not the address the cluster
// knows is refused, naming both.
func TestAdvertisedAddresses(t *testing.T) {
	httpAddr := clustertest.FreeAddr(t)
	var want server.Addrs
	port := func(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }
	c := clustertest.Start(t, 3, clustertest.Options{Partitions: 2, Configure: func(i int, cfg *server.Config) {
		if i != 0 {
			return
		}
		cfg.AdvertisePeer = cfg.PeerAddr // what --initial-cluster names
		want = server.Addrs{
			GRPC:   "localhost:" + port(cfg.GRPCAddr),
			Peer:   cfg.PeerAddr,
			Gossip: "127.0.0.1:" + port(cfg.GossipAddr), // "localhost" resolved
			HTTP:   "localhost:" + port(httpAddr),
		}
		cfg.AdvertiseGRPC, cfg.AdvertiseGossip, cfg.AdvertiseHTTP = want.GRPC, "localhost:"+port(cfg.GossipAddr), want.HTTP
		cfg.GRPCAddr, cfg.PeerAddr = "0.0.0.0:"+port(cfg.GRPCAddr), "0.0.0.0:"+port(cfg.PeerAddr)
		cfg.GossipAddr, cfg.HTTPAddr = "0.0.0.0:"+port(cfg.GossipAddr), "0.0.0.0:"+port(httpAddr)
		cfg.InsecurePeer = true // a test on one host: plaintext off loopback
	}})
	n1 := c.Node(0)
	if got := n1.Advertised(); got != want {
		t.Fatalf("n1 advertises %+v, want %+v", got, want)
	}
	if b := n1.Addrs(); !strings.HasPrefix(b.GRPC, "0.0.0.0:") && !strings.HasPrefix(b.GRPC, "[::]:") {
		t.Fatalf("n1's client listener is bound to %s, not every interface", b.GRPC)
	}
	put(t, c, 1, "advertised", "yes") // the cluster works with n1 on 0.0.0.0
	cl := kvrpc.NewClusterClient(c.Conn(2))
	clustertest.Eventually(t, 10*time.Second, func() error {
		resp, err := cl.Members(ctxT(t, 3*time.Second), &kvpb.MembersRequest{})
		if err != nil {
			return err
		}
		for _, m := range resp.GetMembers() {
			if m.GetId() != "n1" {
				continue
			}
			got := server.Addrs{GRPC: m.GetGrpcAddr(), Peer: m.GetPeerAddr(), Gossip: m.GetGossipAddr(), HTTP: m.GetHttpAddr()}
			if got != want || m.GetState() != kvpb.MemberState_MEMBER_STATE_ALIVE {
				return fmt.Errorf("n3 sees n1 %v at %+v, want alive at %+v", m.GetState(), got, want)
			}
			return nil
		}
		return errors.New("n3 does not list n1")
	})
	resp, err := http.Get("http://" + want.HTTP + "/healthz")
	if err != nil {
		t.Fatalf("/healthz on the advertised HTTP address: %v", err)
	}
	resp.Body.Close()

	c.Stop(0)
	c.Reconfigure(0, func(cfg *server.Config) {
		cfg.InitialCluster = "" // data dir's layout only: the start itself compares
		cfg.AdvertisePeer = "localhost:" + port(cfg.PeerAddr)
	})
	_, err = server.Start(c.Config(0), nil)
	if !errors.Is(err, server.ErrConfig) || !strings.Contains(err.Error(), "--advertise-peer localhost:") || !strings.Contains(err.Error(), want.Peer) {
		t.Fatalf("restart with another --advertise-peer: %v, want ErrConfig naming both addresses", err)
	}
}
