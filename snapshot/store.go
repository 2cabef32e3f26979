package snapshot

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/smithy-go"
	gcaws "gocloud.dev/aws"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // file:// stores
	_ "gocloud.dev/blob/s3blob"   // s3:// stores
	"gocloud.dev/gcerrors"

	"github.com/cutkv/cutkv/checkpoint"
	"github.com/cutkv/cutkv/internal/command"
)

// Options tune a Store. The zero value is the default.
type Options struct {
	// LockTTL is how long an upload or prune lock counts as live after it
	// was last refreshed; a lock older than that belongs to a process that
	// died and is ignored and removed. Holders refresh their lock every
	// LockTTL/3 while they work. Clocks of the machines that share a store
	// must agree to well within LockTTL. Default 10 minutes.
	LockTTL time.Duration
	// PollInterval is how often BeginUpload looks again while a prune or
	// delete holds the store. Default 200 ms.
	PollInterval time.Duration
	// Now is the clock for locks; default time.Now.
	Now func() time.Time
	// OnError, if set, is called with the kind of each bucket operation
	// that fails (not for objects found missing where that is an answer);
	// it must not block.
	OnError func(Op)
}

// Validate checks the options and fills in the defaults.
func (o *Options) Validate() error {
	if o.LockTTL < 0 || o.PollInterval < 0 {
		return fmt.Errorf("%w: negative LockTTL %v or PollInterval %v", ErrInvalid, o.LockTTL, o.PollInterval)
	}
	if o.LockTTL == 0 {
		o.LockTTL = 10 * time.Minute
	}
	if o.PollInterval == 0 {
		o.PollInterval = 200 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// Store is one cluster's snapshot store in a blob bucket: every object it
// reads or writes lies under "<cluster id, 16 hex digits>/" (see the
// package doc for the layout). Its methods do network or disk I/O and
// block; they are safe for concurrent use, and several processes may
// share a store (the locks in the package doc keep uploads and
// prunes apart).
type Store struct {
	// fileDir is the directory of a file:// store ("" for others): it is
	// listed directly (listRaw).
	fileDir string
	bucket  *blob.Bucket
	url     string // redacted, for messages
	cluster uint64
	prefix  string
	opts    Options
}

// OpenStore opens the snapshot store of cluster clusterID at url with
// the default Options. See OpenStoreOptions.
func OpenStore(ctx context.Context, url string, clusterID uint64) (*Store, error) {
	return OpenStoreOptions(ctx, url, clusterID, Options{})
}

// OpenStoreOptions opens the snapshot store of cluster clusterID at
// rawURL, a gocloud.dev/blob bucket URL:
//
//	file:///var/lib/cutkv/snapshots            a directory (it must exist, or add ?create_dir=1)
//	s3://BUCKET?region=us-east-1               AWS S3, credentials from the AWS environment
//	s3://BUCKET?endpoint=http://127.0.0.1:9000&region=us-east-1&use_path_style=true
//	                                           an S3-compatible server
//
// For file:// it sets no_tmp_dir unless the URL says otherwise, so that
// an object is written next to its final name and renamed there (the
// system temporary directory may be another file system, across which
// a rename fails). It lists the bucket once, so that a missing bucket or
// refused credentials show here: errors name the URL (without any
// password) and wrap ErrInvalid, ErrNotFound or ErrAccess where they fit.
func OpenStoreOptions(ctx context.Context, rawURL string, clusterID uint64, opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot store URL %q: %v", ErrInvalid, rawURL, err)
	}
	shown := rawURL
	if _, has := u.User.Password(); has {
		shown = u.Redacted()
	}
	if clusterID == 0 {
		return nil, fmt.Errorf("%w: snapshot store %s: cluster id 0", ErrInvalid, shown)
	}
	switch u.Scheme {
	case "file":
		if u.Path == "" || u.Path == "/" && u.Host == "" {
			return nil, fmt.Errorf("%w: snapshot store %s: no directory (want file:///some/dir)", ErrInvalid, shown)
		}
		q := u.Query()
		if q.Get("create_dir") == "" && u.Host != "." {
			if _, err := os.Stat(filepath.FromSlash(u.Path)); errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("%w: snapshot store %s: directory %s does not exist (create it, or add create_dir=1 to the URL; "+
					"a store shared by several nodes must be the same directory on each)", ErrNoStore, shown, u.Path)
			}
		}
		if _, set := q["no_tmp_dir"]; !set {
			q.Set("no_tmp_dir", "1")
			u.RawQuery = q.Encode()
		}
	case "s3":
		if u.Host == "" {
			return nil, fmt.Errorf("%w: snapshot store %s: no bucket (want s3://BUCKET?region=…)", ErrInvalid, shown)
		}
		if err := checkS3Credentials(ctx, u.Query(), shown); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%w: snapshot store %s: scheme %q (want file:// or s3://)", ErrInvalid, shown, u.Scheme)
	}
	b, err := blob.OpenBucket(ctx, u.String())
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot store %s: %v", ErrInvalid, shown, err)
	}
	s := &Store{bucket: b, url: shown, cluster: clusterID, prefix: clusterHex(clusterID) + "/", opts: opts}
	if u.Scheme == "file" && u.Host == "" {
		s.fileDir = filepath.FromSlash(u.Path)
	}
	var ok bool
	if s.fileDir != "" {
		// A directory store is checked by looking at the directory:
		// the driver's IsAccessible lists the whole bucket, and a
		// listing fails as "not found" when another node's upload
		// renames its temporary file in the middle of the walk.
		ok, err = dirExists(s.fileDir)
	} else {
		ok, err = b.IsAccessible(ctx)
	}
	if err == nil && !ok {
		err = fmt.Errorf("%w: snapshot store %s: the bucket does not exist (create it, or check the bucket name, region and endpoint in the URL)", ErrNoStore, shown)
	} else if err != nil {
		err = s.wrap(OpList, "listing the bucket", err)
	}
	if err != nil {
		b.Close()
		return nil, err
	}
	return s, nil
}

// CredentialTimeout bounds the discovery of an s3:// store's credentials
// (environment, shared files, container and instance metadata): without
// a bound, a machine with none waits out the SDK's metadata retries
// (about 12 s) and fails with their whole chain of errors.
const CredentialTimeout = 2 * time.Second

// credentialParams are the URL parameters that choose an s3:// store's
// credentials (gocloud.dev/aws.V2ConfigFromURLParams reads them).
var credentialParams = []string{"region", "endpoint", "hostname_immutable", "profile", "role", "anonymous", "dualstack", "fips"}

// checkS3Credentials resolves the credentials an s3:// store at a URL
// with query q would sign with, within CredentialTimeout, so that a
// machine without any is told so at once, in one line, before the first
// request. It fails with ErrAccess.
func checkS3Credentials(ctx context.Context, q url.Values, shown string) error {
	cq := url.Values{}
	for _, k := range credentialParams {
		if v, ok := q[k]; ok {
			cq[k] = v
		}
	}
	if anon, _ := strconv.ParseBool(cq.Get("anonymous")); anon {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, CredentialTimeout)
	defer cancel()
	cfg, err := gcaws.V2ConfigFromURLParams(ctx, cq)
	if err != nil {
		return fmt.Errorf("%w: snapshot store %s: reading the AWS configuration: %v", ErrInvalid, shown, err)
	}
	if cfg.Credentials != nil {
		if _, err = cfg.Credentials.Retrieve(ctx); err == nil {
			return nil
		}
	}
	why := "none found"
	if ctx.Err() != nil {
		why = fmt.Sprintf("none found within %v", CredentialTimeout)
	}
	return fmt.Errorf("%w: snapshot store %s: no AWS credentials (%s): set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "+
		"or AWS_PROFILE (or ?profile= in the URL) naming a profile in ~/.aws/credentials, or run where an instance or container role provides them; "+
		"?anonymous=true for a public bucket", ErrAccess, shown, why)
}

// dirExists says whether dir is there and a directory.
func dirExists(dir string) (bool, error) {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	case !fi.IsDir():
		return false, fmt.Errorf("%s is not a directory", dir)
	}
	return true, nil
}

// Close releases the bucket.
func (s *Store) Close() error { return s.bucket.Close() }

// URL returns the store's URL as OpenStore got it, any password hidden.
func (s *Store) URL() string { return s.url }

// ClusterID returns the cluster whose objects the store reads and writes.
func (s *Store) ClusterID() uint64 { return s.cluster }

// Object keys.
const (
	piecesDir    = "pieces/"
	manifestsDir = "manifests/"
	uploadingDir = "uploading/"
	pruningDir   = "pruning/"
	jsonExt      = ".json"
)

func (s *Store) pieceKey(name string) string  { return s.prefix + piecesDir + name }
func (s *Store) manifestKey(id string) string { return s.prefix + manifestsDir + id + jsonExt }

// isAccess says whether err is the store refusing the credentials.
func isAccess(err error) bool {
	if gcerrors.Code(err) == gcerrors.PermissionDenied {
		return true
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "Forbidden",
			"InvalidToken", "ExpiredToken", "InvalidSecurity":
			return true
		}
	}
	// No credentials to sign with. The SDK has no error type for this
	// on every path (its identity resolution wraps a plain error), so
	// its words are matched too.
	var se *v4.SigningError
	msg := err.Error()
	return errors.As(err, &se) || strings.Contains(msg, "get identity: ") || strings.Contains(msg, "failed to retrieve credentials")
}

// Op is the kind of a bucket operation that failed (Options.OnError).
type Op string

// The bucket operations a store counts the errors of.
const (
	OpList   Op = "list"
	OpStat   Op = "stat" // an existence check or an object's attributes
	OpRead   Op = "read"
	OpWrite  Op = "write"
	OpDelete Op = "delete"
)

// Ops lists every Op.
func Ops() []Op { return []Op{OpList, OpStat, OpRead, OpWrite, OpDelete} }

// wrap names the store and the operation in an error of the bucket, and
// reports it (Options.OnError). Every error of a bucket call that is
// not an expected "not found" goes through it.
func (s *Store) wrap(kind Op, op string, err error) error {
	if s.opts.OnError != nil {
		s.opts.OnError(kind)
	}
	if isAccess(err) {
		return fmt.Errorf("%w: snapshot store %s: %s: %v (check the credentials: for s3:// the AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY environment variables or the AWS profile)",
			ErrAccess, s.url, op, err)
	}
	return fmt.Errorf("snapshot store %s: %s: %w", s.url, op, err)
}

func notFound(err error) bool { return gcerrors.Code(err) == gcerrors.NotFound }

// isPieceName says whether name is a piece's: a changelog piece or a
// materialization file.
func isPieceName(name string) bool {
	if _, ok := ParsePieceName(name); ok {
		return true
	}
	if isFileObjectName(name) {
		return true
	}
	_, ok := checkpoint.ParseName(name)
	return ok
}

func checkPieceName(name string) error {
	if !isPieceName(name) {
		return fmt.Errorf("%w: %q is not a piece name (gNNNN-<lo>-<hi>.log, pNNNN-<index>.mat or .ckpt, f-<sha256>)", ErrInvalid, name)
	}
	return nil
}

// HasPiece says whether the store holds the piece.
func (s *Store) HasPiece(ctx context.Context, name string) (bool, error) {
	if err := checkPieceName(name); err != nil {
		return false, err
	}
	ok, err := s.bucket.Exists(ctx, s.pieceKey(name))
	if err != nil {
		return false, s.wrap(OpStat, "looking up piece "+name, err)
	}
	return ok, nil
}

// PutPiece stores the piece name (a changelog piece, "gNNNN-<lo>-<hi>.log",
// or a materialization file, "pNNNN-<index>.mat") with the bytes of r,
// and returns their SHA-256 in hex and their size, for the manifest. An
// existing piece is never overwritten: ErrExists (pieces are immutable
// and the same on every replica, so the stored one serves).
//
// A blob store has no rename, so the piece is written under its final
// name directly, with a conditional write (create only if absent), and
// then read back: a piece whose stored bytes do not hash to what was
// sent is deleted again and the call fails with ErrCorrupt. The write is
// atomic on both drivers (an S3 PUT or multipart upload becomes visible
// complete or not at all; file:// renames a finished temporary file, and
// PutPiece fsyncs it before), so a reader never sees half a piece; the
// read-back catches damage on the way and costs one more read of the
// piece. Call it while holding an upload (BeginUpload), or a prune may
// delete the piece as unreferenced.
func (s *Store) PutPiece(ctx context.Context, name string, r io.Reader) (sha string, size int64, err error) {
	if err := checkPieceName(name); err != nil {
		return "", 0, err
	}
	key := s.pieceKey(name)
	// One writer per piece in this process: the same file (a Pebble
	// OPTIONS file is alike in every partition's checkpoint) is often
	// offered by several partitions of one snapshot at once, and the
	// file:// driver's create-if-absent does not exclude a second writer
	// (it rewrites the attributes file under the first one's read-back).
	unlock := lockPiece(s.url + "\x00" + key)
	defer unlock()
	if ok, err := s.bucket.Exists(ctx, key); err != nil {
		return "", 0, s.wrap(OpStat, "looking up piece "+name, err)
	} else if ok {
		return "", 0, fmt.Errorf("%w: piece %s in %s", ErrExists, name, s.url)
	}
	sha, size, err = s.write(ctx, key, r, "application/octet-stream", true)
	if err != nil {
		return "", 0, fmt.Errorf("uploading piece %s: %w", name, err)
	}
	got, gotSize, err := s.hashObject(ctx, key)
	for try := 1; err != nil && !notFound(err) && try < readBackTries && ctx.Err() == nil; try++ {
		// A read that fails (not one that reads other bytes) may have met
		// another process writing the same piece, whose bytes are the
		// same (the name is their hash): read again.
		time.Sleep(readBackPause)
		got, gotSize, err = s.hashObject(ctx, key)
	}
	if err != nil {
		return "", 0, s.wrap(OpRead, "reading back piece "+name, err)
	}
	if got != sha || gotSize != size {
		derr := s.bucket.Delete(ctx, key)
		err := fmt.Errorf("%w: piece %s in %s: wrote %d bytes with SHA-256 %s, read back %d bytes with %s",
			ErrCorrupt, name, s.url, size, sha, gotSize, got)
		if derr != nil && !notFound(derr) {
			err = fmt.Errorf("%w (and deleting it: %v)", err, derr)
		}
		return "", 0, err
	}
	return sha, size, nil
}

// readBackTries and readBackPause bound PutPiece's read-back of a piece
// whose read fails.
const (
	readBackTries = 4
	readBackPause = 50 * time.Millisecond
)

// pieceLocks holds a mutex per piece being written by this process.
var pieceLocks = struct {
	sync.Mutex
	m map[string]*pieceLock
}{m: map[string]*pieceLock{}}

type pieceLock struct {
	mu   sync.Mutex
	refs int
}

// lockPiece takes the process-wide lock of one piece and returns its
// release; locks of pieces nobody writes are dropped.
func lockPiece(k string) func() {
	pieceLocks.Lock()
	l := pieceLocks.m[k]
	if l == nil {
		l = &pieceLock{}
		pieceLocks.m[k] = l
	}
	l.refs++
	pieceLocks.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		pieceLocks.Lock()
		if l.refs--; l.refs == 0 {
			delete(pieceLocks.m, k)
		}
		pieceLocks.Unlock()
	}
}

// write stores r's bytes under key and returns their SHA-256 and size.
// With onlyNew, an existing object makes it fail with ErrExists.
func (s *Store) write(ctx context.Context, key string, r io.Reader, contentType string, onlyNew bool) (string, int64, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var f *os.File // the file:// driver's temporary file, to fsync
	w, err := s.bucket.NewWriter(wctx, key, &blob.WriterOptions{
		ContentType: contentType,
		IfNotExist:  onlyNew,
		BeforeWrite: func(as func(any) bool) error { as(&f); return nil },
	})
	if err != nil {
		return "", 0, s.wrap(OpWrite, "writing "+key, err)
	}
	h := sha256.New()
	n, err := io.Copy(w, io.TeeReader(r, h))
	if err == nil && f != nil {
		err = f.Sync()
	}
	if err != nil {
		cancel() // abandons the write: nothing appears under key
		w.Close()
		return "", 0, s.wrap(OpWrite, "writing "+key, err)
	}
	if err := w.Close(); err != nil {
		if gcerrors.Code(err) == gcerrors.FailedPrecondition {
			return "", 0, fmt.Errorf("%w: %s in %s", ErrExists, key, s.url)
		}
		return "", 0, s.wrap(OpWrite, "writing "+key, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// hashObject reads an object through and returns its SHA-256 and size.
func (s *Store) hashObject(ctx context.Context, key string) (string, int64, error) {
	rd, err := s.bucket.NewReader(ctx, key, nil)
	if err != nil {
		return "", 0, err
	}
	defer rd.Close()
	h := sha256.New()
	n, err := io.Copy(h, rd)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// OpenPiece opens a stored piece for reading; the caller closes it. A
// piece the store does not hold is ErrNotFound. The bytes are not
// checked here: read a changelog piece through NewPieceReader, a
// materialization through OpenMaterialization, or Check the snapshot.
func (s *Store) OpenPiece(ctx context.Context, name string) (io.ReadCloser, error) {
	if err := checkPieceName(name); err != nil {
		return nil, err
	}
	rd, err := s.bucket.NewReader(ctx, s.pieceKey(name), nil)
	if notFound(err) {
		return nil, fmt.Errorf("%w: piece %s in %s", ErrNotFound, name, s.url)
	}
	if err != nil {
		return nil, s.wrap(OpRead, "opening piece "+name, err)
	}
	return rd, nil
}

// OpenMaterialization opens a stored materialization file (named
// "pNNNN-<index>.mat") as a checkpoint.Reader, which checks the header
// now and the body as it is read. The caller closes it.
func (s *Store) OpenMaterialization(ctx context.Context, name string) (*checkpoint.Reader, error) {
	if _, ok := checkpoint.ParseName(name); !ok {
		return nil, fmt.Errorf("%w: %q is not a materialization name", ErrInvalid, name)
	}
	rc, err := s.OpenPiece(ctx, name)
	if err != nil {
		return nil, err
	}
	r, err := checkpoint.NewReader(rc, name)
	if err != nil {
		rc.Close()
		return nil, err
	}
	return r, nil
}

// PutManifest stores the manifest of a finished upload (Upload.Finish
// calls it). It fills in m.Format and m.Cluster when they are empty,
// validates m, and checks that the store holds every piece m names with
// the size m says (ErrMissing, ErrCorrupt); the SHA-256s are Check's.
// A manifest is never overwritten: ErrExists.
func (s *Store) PutManifest(ctx context.Context, m *Manifest) error {
	if m.Format == 0 {
		m.Format = formatFor(m)
	}
	if m.Cluster == "" {
		m.Cluster = clusterHex(s.cluster)
	} else if m.Cluster != clusterHex(s.cluster) {
		return fmt.Errorf("%w: manifest %q is of cluster %s, the store of %s", ErrInvalid, m.ID, m.Cluster, clusterHex(s.cluster))
	}
	if err := m.Validate(); err != nil {
		return err
	}
	for _, o := range m.Objects() {
		a, err := s.bucket.Attributes(ctx, s.pieceKey(o.Name))
		if notFound(err) {
			return fmt.Errorf("%w: manifest %s names piece %s, which %s does not hold", ErrMissing, m.ID, o.Name, s.url)
		}
		if err != nil {
			return s.wrap(OpStat, "looking up piece "+o.Name, err)
		}
		if a.Size != o.Size {
			return fmt.Errorf("%w: manifest %s says piece %s has %d bytes, %s holds %d",
				ErrCorrupt, m.ID, o.Name, o.Size, s.url, a.Size)
		}
	}
	b, err := encodeManifest(m)
	if err != nil {
		return fmt.Errorf("snapshot: manifest %s: %w", m.ID, err)
	}
	key := s.manifestKey(m.ID)
	if ok, err := s.bucket.Exists(ctx, key); err != nil {
		return s.wrap(OpStat, "looking up manifest "+m.ID, err)
	} else if ok {
		return fmt.Errorf("%w: snapshot %s in %s", ErrExists, m.ID, s.url)
	}
	if _, _, err := s.write(ctx, key, bytes.NewReader(b), "application/json", true); err != nil {
		return fmt.Errorf("storing manifest %s: %w", m.ID, err)
	}
	return nil
}

// Get reads and validates the manifest of snapshot id: ErrNotFound when
// there is none, ErrVersion for a newer format, ErrCorrupt for one that
// does not parse or is another snapshot's or cluster's.
func (s *Store) Get(ctx context.Context, id string) (*Manifest, error) {
	if err := validateID(id); err != nil {
		return nil, err
	}
	key := s.manifestKey(id)
	b, err := s.bucket.ReadAll(ctx, key)
	if notFound(err) {
		return nil, fmt.Errorf("%w: snapshot %s in %s", ErrNotFound, id, s.url)
	}
	if err != nil {
		return nil, s.wrap(OpRead, "reading manifest "+id, err)
	}
	m, err := decodeManifest(s.url+"/"+key, b)
	if err != nil {
		return nil, err
	}
	if m.ID != id || m.Cluster != clusterHex(s.cluster) {
		return nil, fmt.Errorf("%w: manifest %s/%s holds snapshot %q of cluster %s", ErrCorrupt, s.url, key, m.ID, m.Cluster)
	}
	return m, nil
}

// List returns every snapshot of the cluster, sorted by cut version (then
// id). It reads every manifest: one that cannot be read or parsed fails
// the whole call, naming it (Prune and Delete rely on knowing every
// reference). Objects under manifests/ that are not named <id>.json are
// ignored.
func (s *Store) List(ctx context.Context) ([]Manifest, error) {
	ids, err := s.listNames(ctx, manifestsDir)
	if err != nil {
		return nil, err
	}
	var out []Manifest
	for _, name := range ids {
		id, ok := strings.CutSuffix(name, jsonExt)
		if !ok || validateID(id) != nil {
			continue
		}
		m, err := s.Get(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue // deleted since the listing
		}
		if err != nil {
			return nil, err
		}
		out = append(out, *m)
	}
	slices.SortFunc(out, func(a, b Manifest) int {
		return cmp.Or(cmp.Compare(a.CutVersion, b.CutVersion), strings.Compare(a.ID, b.ID))
	})
	return out, nil
}

// IDs returns the ids of the cluster's snapshots, sorted, without reading
// the manifests (manifests never change, so a caller may cache them by id).
func (s *Store) IDs(ctx context.Context) ([]string, error) {
	names, err := s.listNames(ctx, manifestsDir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, name := range names {
		if id, ok := strings.CutSuffix(name, jsonExt); ok && validateID(id) == nil {
			out = append(out, id)
		}
	}
	return out, nil
}

// StatPiece reads a stored piece through and returns it as a manifest
// records it (size and SHA-256): for a piece another upload stored first
// (PutPiece's ErrExists). ErrNotFound when there is none.
func (s *Store) StatPiece(ctx context.Context, name string) (Object, error) {
	if err := checkPieceName(name); err != nil {
		return Object{}, err
	}
	sha, size, err := s.hashObject(ctx, s.pieceKey(name))
	if notFound(err) {
		return Object{}, fmt.Errorf("%w: piece %s in %s", ErrNotFound, name, s.url)
	}
	if err != nil {
		return Object{}, s.wrap(OpRead, "reading piece "+name, err)
	}
	return Object{Name: name, Size: size, SHA256: sha}, nil
}

// listNames lists the object names under the cluster's dir/, sorted.
func (s *Store) listNames(ctx context.Context, dir string) ([]string, error) {
	names, err := s.listRaw(ctx, dir)
	if err != nil {
		return nil, s.wrap(OpList, "listing "+s.prefix+dir, err)
	}
	return names, nil
}

// listRaw is listNames without the error context.
func (s *Store) listRaw(ctx context.Context, dir string) ([]string, error) {
	prefix := s.prefix + dir
	if s.fileDir != "" {
		// The file:// driver's own listing fails when a file it read in
		// the directory is gone when it looks at it: the temporary file
		// of an upload in flight, renamed meanwhile. Our directories are
		// flat; read them here, skipping the driver's side files.
		ents, err := os.ReadDir(filepath.Join(s.fileDir, filepath.FromSlash(prefix)))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		var out []string
		for _, e := range ents {
			n := e.Name()
			if e.IsDir() || strings.HasSuffix(n, ".attrs") || strings.HasSuffix(n, ".tmp") {
				continue
			}
			out = append(out, n)
		}
		return out, nil // ReadDir sorts by name
	}
	it := s.bucket.List(&blob.ListOptions{Prefix: prefix})
	var out []string
	for {
		o, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if !o.IsDir {
			out = append(out, strings.TrimPrefix(o.Key, prefix))
		}
	}
	slices.Sort(out)
	return out, nil
}

// Check verifies snapshot id without restoring it: the manifest is valid
// and each partition's chain covers base+1 … End without gaps; every
// piece is present, has the manifest's size and SHA-256 and decodes
// (changelog pieces entry by entry, materializations chunk by chunk, each
// holding the partition and range its name says); the entry at Pos has
// cut version >= v and the one before it (when it is a command after the
// base) < v; the entry at End is CutFinish(v) with that Pos. It stops at
// the first fault, in partition order, base first, and returns it as a
// *CheckError naming the piece (errors.Is: ErrMissing, ErrCorrupt,
// ErrIncomplete). It reads every piece whole.
func (s *Store) Check(ctx context.Context, id string) error {
	m, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	for i := range m.Partitions {
		p := &m.Partitions[i]
		if p.Base != nil {
			verify := func(r io.Reader) error { return verifyBase(p.Base.Name, r) }
			if len(p.Base.Files) > 0 {
				verify = func(r io.Reader) error { return verifyCheckpointBase(p, r) }
			}
			if err := s.checkObject(ctx, m, p, p.Base.Object, verify); err != nil {
				return err
			}
			for _, f := range p.Base.Files {
				if err := s.checkObject(ctx, m, p, f.Object, func(io.Reader) error { return nil }); err != nil {
					return err
				}
			}
		}
		for _, pc := range p.Pieces {
			verify := func(r io.Reader) error { return verifyLog(m, p, pc, r) }
			if err := s.checkObject(ctx, m, p, pc.Object, verify); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkObject reads piece o through verify, hashing what it reads, and
// compares size and SHA-256 with the manifest.
func (s *Store) checkObject(ctx context.Context, m *Manifest, p *Partition, o Object, verify func(io.Reader) error) error {
	fail := func(err error) error {
		return &CheckError{Snapshot: m.ID, Partition: p.Partition, Piece: o.Name, Err: err}
	}
	rd, err := s.bucket.NewReader(ctx, s.pieceKey(o.Name), nil)
	if notFound(err) {
		return fail(fmt.Errorf("%w: %s does not hold it", ErrMissing, s.url))
	}
	if err != nil {
		return fail(s.wrap(OpRead, "opening piece "+o.Name, err))
	}
	defer rd.Close()
	h := sha256.New()
	cr := &countingReader{r: io.TeeReader(rd, h)}
	verr := verify(cr)
	if verr != nil && !errors.Is(verr, ErrCorrupt) && !errors.Is(verr, ErrIncomplete) && !errors.Is(verr, ErrVersion) {
		return fail(verr) // reading failed: the checksum says nothing
	}
	// Hash the rest, so that a damaged piece reports its checksum too.
	if _, err := io.Copy(io.Discard, cr); err != nil {
		return fail(s.wrap(OpRead, "reading piece "+o.Name, err))
	}
	sum := hex.EncodeToString(h.Sum(nil))
	switch {
	case verr != nil && (sum != o.SHA256 || cr.n != o.Size):
		return fail(fmt.Errorf("%w (and its %d bytes have SHA-256 %s, the manifest says %d bytes with %s)",
			verr, cr.n, sum, o.Size, o.SHA256))
	case verr != nil:
		return fail(verr)
	case sum != o.SHA256 || cr.n != o.Size:
		return fail(fmt.Errorf("%w: %d bytes with SHA-256 %s, the manifest says %d bytes with %s",
			ErrCorrupt, cr.n, sum, o.Size, o.SHA256))
	}
	return nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// verifyBase reads materialization file name through checkpoint's
// reader: header (with the partition and index the name says), every
// chunk's CRC, the trailer's SHA-256 of the body.
func verifyBase(name string, r io.Reader) error {
	cr, err := checkpoint.NewReader(io.NopCloser(r), name)
	if err == nil {
		_, err = io.Copy(io.Discard, cr)
		cr.Close()
	}
	switch {
	case errors.Is(err, checkpoint.ErrCorrupt):
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	case errors.Is(err, checkpoint.ErrVersion):
		return fmt.Errorf("%w: %w", ErrVersion, err)
	}
	return err
}

// verifyCheckpointBase decodes the checkpoint manifest of p's base and
// checks that it is of p at the base's index and lists exactly the files
// the snapshot's manifest names, with their sizes and SHA-256s.
func verifyCheckpointBase(p *Partition, r io.Reader) error {
	b, err := io.ReadAll(io.LimitReader(r, 64<<20))
	if err != nil {
		return err
	}
	meta, files, err := checkpoint.DecodeManifest(p.Base.Name, b)
	switch {
	case errors.Is(err, checkpoint.ErrVersion):
		return fmt.Errorf("%w: %w", ErrVersion, err)
	case err != nil:
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	case meta.Partition != p.Partition || meta.Index != p.Base.Index:
		return fmt.Errorf("%w: checkpoint manifest %s is of partition %d at %d", ErrCorrupt, p.Base.Name, meta.Partition, meta.Index)
	case len(files) != len(p.Base.Files):
		return fmt.Errorf("%w: checkpoint manifest %s lists %d files, the snapshot %d", ErrCorrupt, p.Base.Name, len(files), len(p.Base.Files))
	}
	for i, f := range files {
		if g := p.Base.Files[i]; g.File != f.Name || g.Size != f.Size || g.SHA256 != f.Hex() {
			return fmt.Errorf("%w: checkpoint manifest %s: file %s (%d bytes, %s), the snapshot says %s (%d bytes, %s)",
				ErrCorrupt, p.Base.Name, f.Name, f.Size, f.Hex(), g.File, g.Size, g.SHA256)
		}
	}
	return nil
}

// verifyLog decodes changelog piece pc of partition p and checks the
// entries that mark the cut.
func verifyLog(m *Manifest, p *Partition, pc Piece, r io.Reader) error {
	pr, err := NewPieceReader(r, pc.Name)
	if err != nil {
		return err
	}
	v := m.CutVersion
	for {
		e, err := pr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		i := e.GetIndex()
		if i < pc.From || (i != p.Pos-1 && i != p.Pos && i != p.End) {
			continue
		}
		cmd, ok, err := command.Decode(e)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		switch {
		case i == p.End && p.End != p.Pos:
			f := cmd.GetCutFinish()
			if !ok || f == nil || f.GetVersion() != v {
				return fmt.Errorf("%w: entry %d, the partition's end, is not CutFinish(%d)", ErrIncomplete, i, v)
			}
			if f.GetPos() != p.Pos {
				return fmt.Errorf("%w: the CutFinish(%d) at %d says pos %d, the manifest %d", ErrIncomplete, v, i, f.GetPos(), p.Pos)
			}
		case i == p.Pos:
			if !ok || cmd.GetCutVersion() < v {
				return fmt.Errorf("%w: entry %d, the manifest's pos, has cut version %d, want >= %d", ErrIncomplete, i, cmd.GetCutVersion(), v)
			}
		case i == p.Pos-1:
			if ok && cmd.GetCutVersion() >= v {
				return fmt.Errorf("%w: entry %d, before the manifest's pos %d, already has cut version %d >= %d",
					ErrIncomplete, i, p.Pos, cmd.GetCutVersion(), v)
			}
		}
	}
}
