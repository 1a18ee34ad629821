// Package s3 is the blob store's bucket on any S3-compatible server
// (MinIO, Ceph RGW, Garage, AWS S3), through minio-go. It implements
// blob.Objects under one key prefix of one bucket.
package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/den-dev/den/internal/blob"
	"github.com/den-dev/den/internal/errdefs"
)

// Location is where the objects live, as an s3:// URL says it:
//
//	s3://BUCKET/PREFIX?endpoint=HOST:PORT&insecure=1&region=REGION
//
// endpoint defaults to s3.amazonaws.com; insecure=1 speaks plain HTTP
// (for a server on loopback or a private network), else HTTPS.
type Location struct {
	Bucket   string
	Prefix   string // "" or ends in "/"
	Endpoint string
	Insecure bool
	Region   string
}

// String is the URL of l; it holds no secret.
func (l Location) String() string {
	q := url.Values{}
	q.Set("endpoint", l.Endpoint)
	if l.Insecure {
		q.Set("insecure", "1")
	}
	if l.Region != "" {
		q.Set("region", l.Region)
	}
	return "s3://" + l.Bucket + "/" + l.Prefix + "?" + q.Encode()
}

// ParseURL reads an s3:// URL. It refuses credentials in the URL: they
// would be on dend's command line, which every user of the host can read.
func ParseURL(raw string) (Location, error) {
	bad := func(format string, a ...any) (Location, error) {
		return Location{}, errdefs.WithHint(errdefs.Invalid("--blobs: "+format, a...),
			"write it as s3://BUCKET/PREFIX?endpoint=HOST:PORT[&insecure=1][&region=REGION], with the keys in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or DEN_BLOBS_*) or in --blobs-credentials FILE")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad("%q is not a URL", raw)
	}
	if u.Scheme != "s3" {
		return bad("%q is not an s3:// URL", raw)
	}
	if u.User != nil {
		return bad("the URL holds credentials, which every user of this host could read on dend's command line")
	}
	l := Location{Bucket: u.Host, Prefix: strings.Trim(u.Path, "/"), Endpoint: "s3.amazonaws.com"}
	if l.Bucket == "" {
		return bad("%q names no bucket", raw)
	}
	if l.Prefix != "" {
		l.Prefix += "/"
	}
	for k, vs := range u.Query() {
		v := vs[len(vs)-1]
		switch k {
		case "endpoint":
			if !validEndpoint(v) {
				return bad("endpoint %q is not HOST or HOST:PORT", v)
			}
			l.Endpoint = v
		case "insecure":
			switch v {
			case "1", "true":
				l.Insecure = true
			case "0", "false":
			default:
				return bad("insecure=%q is neither 1 nor 0", v)
			}
		case "region":
			l.Region = v
		default:
			return bad("unknown parameter %q (known: endpoint, insecure, region)", k)
		}
	}
	return l, nil
}

func validEndpoint(v string) bool {
	if v == "" || strings.ContainsAny(v, "/@?# ") {
		return false
	}
	if strings.Contains(v, ":") {
		_, port, err := net.SplitHostPort(v)
		return err == nil && port != ""
	}
	return true
}

// Credentials are the keys dend signs its requests with.
type Credentials struct {
	AccessKeyID     string
	SecretAccessKey string
}

// Bucket is a prefix of an S3 bucket.
type Bucket struct {
	loc Location
	c   *minio.Client
	log *slog.Logger

	mu    sync.Mutex
	down  error     // why the server did not answer the last request, or nil
	since time.Time // when it stopped answering
}

// ErrUnreachable is the class of errors of a blob store that did not
// answer at all (as opposed to one that answered with a refusal).
var ErrUnreachable = errors.New("the blob store cannot be reached")

// unreachable is an error of a server that did not answer: unavailable
// to the API, and ErrUnreachable to code that waits for it.
type unreachable struct{ msg string }

func (e *unreachable) Error() string { return e.msg }
func (e *unreachable) Is(target error) bool {
	return target == ErrUnreachable || target == errdefs.ErrUnavailable
}

// unreachableErr says, with a hint, that the server did not answer.
func (b *Bucket) unreachableErr(err error) error {
	return errdefs.WithHint(&unreachable{fmt.Sprintf("the blob store cannot be reached (%s, bucket %q: %v)", b.loc.Endpoint, b.loc.Bucket, err)},
		fmt.Sprintf("check that the blob store at %s is up and reachable from this host; uploads wait and retry by themselves, and `den version` shows whether dend reaches the store", b.loc.Endpoint))
}

// note records whether the server answered a request: err is nil when it
// did, or the error of one it did not answer.
func (b *Bucket) note(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case err == nil:
		b.down = nil
	case b.down == nil:
		b.down, b.since = err, time.Now()
	default:
		b.down = err
	}
}

// Reachable reports whether the server answered the last request made
// to it; if not, why, and since when it has not answered.
func (b *Bucket) Reachable() (down error, since time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.down, b.since
}

var _ blob.Objects = (*Bucket)(nil)

// Open connects to the bucket at loc and checks that the credentials may
// list and write in it, so a mistake shows at start, not at the first
// upload.
func Open(ctx context.Context, loc Location, cred Credentials, log *slog.Logger) (*Bucket, error) {
	b, err := Dial(loc, cred, log)
	if err != nil {
		return nil, err
	}
	if err := b.Probe(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// Probe checks that the bucket is there and that the credentials may
// write, read and remove in its prefix. A server that does not answer
// gives an error that is ErrUnreachable.
func (b *Bucket) Probe(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	return b.probe(pctx)
}

// Dial makes the Bucket at loc without asking the server anything: Probe
// checks it.
func Dial(loc Location, cred Credentials, log *slog.Logger) (*Bucket, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cred.AccessKeyID == "" || cred.SecretAccessKey == "" {
		return nil, errdefs.WithHint(errdefs.Invalid("the blob store's credentials are not set"),
			"set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or DEN_BLOBS_ACCESS_KEY_ID and DEN_BLOBS_SECRET_ACCESS_KEY) in dend's environment, or name a file holding them with --blobs-credentials")
	}
	tr, err := minio.DefaultTransport(!loc.Insecure)
	if err != nil {
		return nil, fmt.Errorf("blob store: %w", err)
	}
	tr.MaxIdleConnsPerHost = 32
	c, err := minio.New(loc.Endpoint, &minio.Options{
		Creds:      credentials.NewStaticV4(cred.AccessKeyID, cred.SecretAccessKey, ""),
		Secure:     !loc.Insecure,
		Region:     loc.Region,
		Transport:  tr,
		MaxRetries: 3,
	})
	if err != nil {
		return nil, errdefs.Invalid("--blobs: %v", err)
	}
	return &Bucket{loc: loc, c: c, log: log}, nil
}

// probe checks the bucket is there and that dend may write, read and
// remove in its prefix.
func (b *Bucket) probe(ctx context.Context) error {
	ok, err := b.c.BucketExists(ctx, b.loc.Bucket)
	if err != nil {
		err = b.startErr("reaching", err)
		if errors.Is(err, ErrUnreachable) {
			b.note(err)
		}
		return err
	}
	b.note(nil)
	if !ok {
		return errdefs.WithHint(errdefs.NotFound("bucket %q does not exist at %s", b.loc.Bucket, b.loc.Endpoint),
			"create it first (e.g. `mc mb ALIAS/"+b.loc.Bucket+"`); dend does not create buckets")
	}
	key := "probe/" + fmt.Sprint(time.Now().UnixNano())
	if err := b.Put(ctx, key, strings.NewReader("den"), 3); err != nil {
		return b.startErr("writing to", err)
	}
	if err := b.Remove(ctx, key); err != nil {
		return b.startErr("removing from", err)
	}
	return nil
}

// startErr explains why the bucket cannot be used.
func (b *Bucket) startErr(doing string, err error) error {
	where := fmt.Sprintf("the blob store at %s (bucket %q)", b.loc.Endpoint, b.loc.Bucket)
	resp := minio.ToErrorResponse(errors.Unwrap(err))
	if resp.Code == "" {
		resp = minio.ToErrorResponse(err)
	}
	switch {
	case resp.StatusCode == http.StatusForbidden || resp.Code == "InvalidAccessKeyId" || resp.Code == "SignatureDoesNotMatch" || resp.Code == "AccessDenied":
		return errdefs.WithHint(errdefs.Unavailable("%s refused dend's credentials while %s it: %s", where, doing, cmpOr(resp.Message, resp.Code)),
			"check the access key and secret dend was given (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, DEN_BLOBS_*, or --blobs-credentials), and that they may read, write and list the bucket")
	case resp.Code != "":
		return errdefs.Unavailable("%s answered %s while %s it: %s", where, resp.Code, doing, resp.Message)
	}
	return errdefs.WithHint(&unreachable{fmt.Sprintf("the blob store cannot be reached (%s: %v)", where, err)},
		"check the endpoint in --blobs, that the server is up, and insecure=1 for a server that speaks plain HTTP")
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Location is where the bucket is.
func (b *Bucket) Location() Location { return b.loc }

// Put writes an object.
func (b *Bucket) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	_, err := b.c.PutObject(ctx, b.loc.Bucket, b.loc.Prefix+key, r, size, minio.PutObjectOptions{
		ContentType: "application/octet-stream", DisableContentSha256: true,
	})
	return b.classify(err, key)
}

// Get opens an object.
func (b *Bucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	o, err := b.c.GetObject(ctx, b.loc.Bucket, b.loc.Prefix+key, minio.GetObjectOptions{})
	if err != nil {
		return nil, b.classify(err, key)
	}
	// The first request is made here, so a missing object shows now.
	st, err := o.Stat()
	if err != nil {
		o.Close()
		return nil, b.classify(err, key)
	}
	return &object{o: o, b: b, key: key, size: st.Size}, nil
}

// object turns a read's errors into den's.
type object struct {
	o    *minio.Object
	b    *Bucket
	key  string
	size int64
}

// Size is the object's size, so a reader can make room for it at once.
func (o *object) Size() int64 { return o.size }

func (o *object) Read(p []byte) (int, error) {
	n, err := o.o.Read(p)
	if err != nil && err != io.EOF {
		err = o.b.classify(err, o.key)
	}
	return n, err
}

func (o *object) Close() error { return o.o.Close() }

// Touch renews an object's modification time by copying it onto itself
// with new metadata; S3 servers do that without moving its bytes.
func (b *Bucket) Touch(ctx context.Context, key string) error {
	k := b.loc.Prefix + key
	_, err := b.c.CopyObject(ctx,
		minio.CopyDestOptions{Bucket: b.loc.Bucket, Object: k, ReplaceMetadata: true,
			UserMetadata: map[string]string{"Den-Touched": time.Now().UTC().Format(time.RFC3339Nano)}},
		minio.CopySrcOptions{Bucket: b.loc.Bucket, Object: k})
	return b.classify(err, key)
}

// Stat describes an object.
func (b *Bucket) Stat(ctx context.Context, key string) (blob.ObjectInfo, error) {
	o, err := b.c.StatObject(ctx, b.loc.Bucket, b.loc.Prefix+key, minio.StatObjectOptions{})
	if err != nil {
		return blob.ObjectInfo{}, b.classify(err, key)
	}
	return blob.ObjectInfo{Key: key, Size: o.Size, LastModified: o.LastModified}, nil
}

// List calls fn for every object under prefix.
func (b *Bucket) List(ctx context.Context, prefix string, fn func(blob.ObjectInfo) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for o := range b.c.ListObjects(ctx, b.loc.Bucket, minio.ListObjectsOptions{Prefix: b.loc.Prefix + prefix, Recursive: true}) {
		if o.Err != nil {
			return b.classify(o.Err, prefix)
		}
		if err := fn(blob.ObjectInfo{Key: strings.TrimPrefix(o.Key, b.loc.Prefix), Size: o.Size, LastModified: o.LastModified}); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// Remove deletes an object.
func (b *Bucket) Remove(ctx context.Context, key string) error {
	err := b.c.RemoveObject(ctx, b.loc.Bucket, b.loc.Prefix+key, minio.RemoveObjectOptions{})
	if errors.Is(b.classify(err, key), errdefs.ErrNotFound) {
		return nil
	}
	return b.classify(err, key)
}

// classify gives err den's class: a missing object is not found, and
// everything else the server or the network says is unavailable.
func (b *Bucket) classify(err error, key string) error {
	if err == nil {
		b.note(nil)
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	resp := minio.ToErrorResponse(err)
	switch resp.Code {
	case "NoSuchKey", "NotFound":
		b.note(nil)
		return errdefs.NotFound("object %s not found in the blob store", key)
	case "":
		u := b.unreachableErr(err)
		b.note(u)
		return u
	}
	b.note(nil)
	return errdefs.Unavailable("blob store at %s: %s: %s (%s)", b.loc.Endpoint, resp.Code, resp.Message, key)
}
