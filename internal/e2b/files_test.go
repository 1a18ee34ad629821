package e2b

import (
	"maps"
	"net/http"
	"testing"
)

// An upload's X-Metadata-* headers become user.e2b.* attributes, keys
// lowercased; a file's user.e2b.* attributes come back as its metadata,
// and no other attribute does.
func TestFileMetadata(t *testing.T) {
	h := http.Header{}
	h.Set("X-Metadata-Owner", "alice")
	h.Set("x-metadata-build.id", "42")
	h.Set("X-Metadata-", "no key")
	h.Set("Content-Type", "text/plain")
	md := uploadMetadata(h)
	if want := map[string]string{"owner": "alice", "build.id": "42"}; !maps.Equal(md, want) {
		t.Fatalf("metadata of %v = %v, want %v", h, md, want)
	}
	xattrs := xattrsOf(md)
	if want := map[string]string{"user.e2b.owner": "alice", "user.e2b.build.id": "42"}; !maps.Equal(xattrs, want) {
		t.Fatalf("xattrs = %v", xattrs)
	}
	xattrs["user.other"] = "not E2B's"
	if got := metadataOf(xattrs); !maps.Equal(got, md) {
		t.Errorf("metadata of %v = %v, want %v", xattrs, got, md)
	}
	if uploadMetadata(http.Header{}) != nil || xattrsOf(nil) != nil || metadataOf(map[string]string{"user.x": "1"}) != nil {
		t.Error("no metadata should be nil, which the SDK reads as none")
	}
}
