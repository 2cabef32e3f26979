package snapshot

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestS3NoCredentialsFailsFast: on a machine with no AWS credentials whose
// instance metadata service never answers, opening an s3:// store fails
// within CredentialTimeout (and a little), before any request to the
// store, in one line that says what to set. Before, the SDK's metadata
// retries took about 12 s and the error carried their whole chain.
func TestS3NoCredentialsFailsFast(t *testing.T) {
	// A metadata service that accepts connections and never answers.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	// The store's endpoint: nothing may be asked there.
	store, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	asked := make(chan struct{}, 1)
	go func() {
		if c, err := store.Accept(); err == nil {
			asked <- struct{}{}
			c.Close()
		}
	}()
	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
		"AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none, "AWS_WEB_IDENTITY_TOKEN_FILE": "",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "",
		"AWS_EC2_METADATA_DISABLED": "", "AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://" + lis.Addr().String(),
		"AWS_ENDPOINT_URL": "", "AWS_ENDPOINT_URL_S3": "",
	} {
		t.Setenv(k, v)
	}
	url := "s3://bucket?endpoint=http://" + store.Addr().String() + "&region=us-east-1&use_path_style=true"
	start := time.Now()
	_, err = OpenStore(context.Background(), url, 1)
	took := time.Since(start)
	if !errors.Is(err, ErrAccess) {
		t.Fatalf("no credentials: %v, want ErrAccess", err)
	}
	t.Logf("after %v: %v", took.Round(time.Millisecond), err)
	if took > CredentialTimeout+time.Second {
		t.Errorf("took %v, want about CredentialTimeout (%v)", took, CredentialTimeout)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || !strings.Contains(msg, "AWS_ACCESS_KEY_ID") || !strings.Contains(msg, "AWS_PROFILE") ||
		!strings.Contains(msg, url) || strings.Contains(msg, "ec2imds") || len(msg) > 600 {
		t.Errorf("message is not one line naming what to set:\n%s", msg)
	}
	select {
	case <-asked:
		t.Error("the store was asked before the credentials were found")
	default:
	}

	// Anonymous access asks for no credentials.
	if err := checkS3Credentials(context.Background(), map[string][]string{"anonymous": {"true"}, "region": {"us-east-1"}}, url); err != nil {
		t.Errorf("anonymous=true: %v", err)
	}
	// Credentials from the environment are found at once.
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	if err := checkS3Credentials(context.Background(), map[string][]string{"region": {"us-east-1"}}, url); err != nil {
		t.Errorf("credentials in the environment: %v", err)
	}
}
