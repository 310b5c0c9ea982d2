package output

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/synapse-embed/synapse/io/objstore"
)

// Schema metadata keys of every job output that merge checks a part by.
const (
	MetaShard       = "synapse.shard"        // "I/N": the shard that wrote the part
	MetaModelDigest = "synapse.model_digest" // the model's artifact digest
)

// SettingsDigest is a digest of an output's metadata but the shard: what
// every shard of one job shares, and what its manifest records.
func SettingsDigest(md arrow.Metadata) string {
	h := sha256.New()
	for i, k := range md.Keys() {
		if k != MetaShard {
			fmt.Fprintf(h, "%q=%q\n", k, md.Values()[i])
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// checkParts refuses a part whose own metadata is not its manifest's (a
// part replaced after its shard ran: embedded with another model, other
// settings or another dtype and ranges), or differs from the other parts':
// the manifests alone cannot tell. It reads each part's footer only.
func checkParts(ctx context.Context, ms []Manifest, paths []string) error {
	var first arrow.Metadata
	for k, m := range ms {
		part := objstore.Beside(paths[k], m.Output)
		sc, err := FileSchema(ctx, part)
		if err != nil {
			return fmt.Errorf("merge %s: %w", part, err)
		}
		md := sc.Metadata()
		if k == 0 {
			first = md
		}
		bad := func(field, got, want, whose string) error {
			return fmt.Errorf("%w: part %s: its %s is %q; %s says %q", ErrForeignShard, part, field, got, whose, want)
		}
		if got, want := metaValue(md, MetaShard), fmt.Sprintf("%d/%d", m.Shard, m.Shards); got != want {
			return bad(MetaShard, got, want, "its manifest "+paths[k])
		}
		if got := metaValue(md, MetaModelDigest); got != m.ModelDigest {
			return bad(MetaModelDigest, got, m.ModelDigest, "its manifest "+paths[k])
		}
		if key := metaDiff(md, first); key != "" {
			return bad(key, metaValue(md, key), metaValue(first, key), "part "+objstore.Beside(paths[0], ms[0].Output))
		}
		if got := SettingsDigest(md); got != m.SettingsDigest {
			return fmt.Errorf("%w: part %s: its metadata's settings digest is %s; its manifest %s says %s (the part was not written by that shard)",
				ErrForeignShard, part, got, paths[k], m.SettingsDigest)
		}
	}
	return nil
}

// metaValue is md's value of key, "" when it has none.
func metaValue(md arrow.Metadata, key string) string {
	if i := md.FindKey(key); i >= 0 {
		return md.Values()[i]
	}
	return ""
}

// metaDiff names the first key but the shard whose value differs between a
// and b (a key one of them lacks included), "" when none does.
func metaDiff(a, b arrow.Metadata) string {
	for _, k := range append(a.Keys(), b.Keys()...) {
		if k == MetaShard {
			continue
		}
		if a.FindKey(k) < 0 || b.FindKey(k) < 0 || metaValue(a, k) != metaValue(b, k) {
			return k
		}
	}
	return ""
}
