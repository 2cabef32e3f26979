package snapshot

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cutkv/cutkv/internal/s3test"
)

// TestS3Store runs the store against a real S3-compatible server on the
// loopback (internal/s3test: Versity's S3 gateway, built from its module
// the first time and cached). Without it the test is skipped, unless CI is
// set: then it fails.
func TestS3Store(t *testing.T) {
	endpoint := s3test.Start(t)
	start := time.Now()
	s3URL := func(bucket string) string { return s3test.URL(endpoint, bucket) }
	url := s3URL(s3test.Bucket)
	ctx := context.Background()
	open := func(cluster uint64, opts Options) *Store {
		s, err := OpenStoreOptions(ctx, url, cluster, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}

	t.Run("RoundTrip", func(t *testing.T) {
		roundTrip(t, func(cluster uint64) *Store { return open(cluster, Options{}) })
	})
	t.Run("UploadReservesPieces", func(t *testing.T) {
		clk := &fakeClock{now: t0}
		uploadReserves(t, open(7, Options{Now: clk.Now, LockTTL: time.Minute}), clk)
	})
	t.Run("Errors", func(t *testing.T) {
		_, err := OpenStore(ctx, s3URL("no-such-bucket"), 1)
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "no-such-bucket") {
			t.Fatalf("missing bucket: %v", err)
		}
		t.Logf("as expected: %v", err)
		s3test.Env(t, s3test.AccessKey, "wrong-secret")
		_, err = OpenStore(ctx, url, 1)
		if !errors.Is(err, ErrAccess) || !strings.Contains(err.Error(), url) {
			t.Fatalf("wrong secret: %v", err)
		}
		t.Logf("as expected: %v", err)
		s3test.Env(t, "", "")
		_, err = OpenStore(ctx, url, 1)
		if !errors.Is(err, ErrAccess) || !strings.Contains(err.Error(), url) {
			t.Fatalf("no credentials: %v", err)
		}
		t.Logf("as expected: %v", err)
	})
	t.Logf("S3 test took %v after the gateway was built", time.Since(start).Round(time.Millisecond))
}
