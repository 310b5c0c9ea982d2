package converttest

import (
	"fmt"
	"math"
)

// HiddenStates computes, in float64 and independently of the converter,
// the last hidden state transformers' BertModel gives for one unpadded
// sequence of token type 0: tokens × hidden.
func (b BERT) HiddenStates(ids []int32) [][]float64 {
	return b.HiddenStatesAttend(ids, len(ids))
}

// HiddenStatesAttend is HiddenStates with the attention mask 1 on the
// first attend tokens and 0 on the rest: no token attends to those, but
// their states are computed all the same (ColBERT's query expansion).
func (b BERT) HiddenStatesAttend(ids []int32, attend int) [][]float64 {
	t := b.Tensors()
	get := func(name string) []float32 { return t.Values[b.Prefix+name] }
	h := b.Hidden
	first := 0
	if b.Offset {
		first = b.PadID + 1
	}
	x := make([][]float64, len(ids))
	word, pos, typ := get("embeddings.word_embeddings.weight"), get("embeddings.position_embeddings.weight"), get("embeddings.token_type_embeddings.weight")
	for j, id := range ids {
		x[j] = make([]float64, h)
		for d := range h {
			x[j][d] = float64(word[int(id)*h+d]) + float64(typ[d]) + float64(pos[(first+j)*h+d])
		}
	}
	x = b.norm(get, "embeddings.LayerNorm", x)
	for l := range b.Layers {
		p := fmt.Sprintf("encoder.layer.%d.", l)
		a := b.attention(get, p, x, attend)
		x = b.norm(get, p+"attention.output.LayerNorm", add(linear(get, p+"attention.output.dense", a, h, h), x))
		inter := linear(get, p+"intermediate.dense", x, h, b.FFN)
		for _, row := range inter {
			for i, v := range row {
				row[i] = v * (1 + math.Erf(v/math.Sqrt2)) / 2
			}
		}
		x = b.norm(get, p+"output.LayerNorm", add(linear(get, p+"output.dense", inter, b.FFN, h), x))
	}
	return x
}

// Logits computes a sequence classifier's logits for one unpadded
// sequence: the classifier over the pooler's tanh(dense(first token)).
func (b BERT) Logits(ids []int32) []float64 {
	t := b.Tensors()
	h := b.HiddenStates(ids)
	pooled := linear(func(n string) []float32 { return t.Values[b.Prefix+n] }, "pooler.dense", h[:1], b.Hidden, b.Hidden)
	for i, v := range pooled[0] {
		pooled[0][i] = math.Tanh(v)
	}
	return linear(func(n string) []float32 { return t.Values[n] }, "classifier", pooled, b.Hidden, b.Labels)[0]
}

// attention is multi-head self-attention's context (before the output
// projection).
func (b BERT) attention(get func(string) []float32, p string, x [][]float64, attend int) [][]float64 {
	h, n := b.Hidden, len(x)
	keys := min(attend, n) // the keys the mask lets through
	hd := h / b.Heads
	q := linear(get, p+"attention.self.query", x, h, h)
	k := linear(get, p+"attention.self.key", x, h, h)
	v := linear(get, p+"attention.self.value", x, h, h)
	out := make([][]float64, n)
	for i := range out {
		out[i] = make([]float64, h)
	}
	for head := range b.Heads {
		o := head * hd
		for i := range n {
			scores := make([]float64, keys)
			top := math.Inf(-1)
			for j := range keys {
				for d := range hd {
					scores[j] += q[i][o+d] * k[j][o+d]
				}
				scores[j] /= math.Sqrt(float64(hd))
				top = math.Max(top, scores[j])
			}
			var sum float64
			for j := range scores {
				scores[j] = math.Exp(scores[j] - top)
				sum += scores[j]
			}
			for j := range keys {
				for d := range hd {
					out[i][o+d] += scores[j] / sum * v[j][o+d]
				}
			}
		}
	}
	return out
}

// linear is x·Wᵀ + b for a torch Linear's weight [out, in].
func linear(get func(string) []float32, name string, x [][]float64, in, out int) [][]float64 {
	w, bias := get(name+".weight"), get(name+".bias")
	y := make([][]float64, len(x))
	for r, row := range x {
		y[r] = make([]float64, out)
		for o := range out {
			s := float64(bias[o])
			for i := range in {
				s += float64(w[o*in+i]) * row[i]
			}
			y[r][o] = s
		}
	}
	return y
}

func add(a, b [][]float64) [][]float64 {
	for r := range a {
		for i := range a[r] {
			a[r][i] += b[r][i]
		}
	}
	return a
}

// norm is LayerNorm over each row with the module's weight and bias.
func (b BERT) norm(get func(string) []float32, module string, x [][]float64) [][]float64 {
	eps := b.Eps
	if eps == 0 {
		eps = 1e-12
	}
	g, beta := get(module+".weight"), get(module+".bias")
	for _, row := range x {
		var mean, vr float64
		for _, v := range row {
			mean += v
		}
		mean /= float64(len(row))
		for _, v := range row {
			vr += (v - mean) * (v - mean)
		}
		vr /= float64(len(row))
		for i, v := range row {
			row[i] = (v-mean)/math.Sqrt(vr+eps)*float64(g[i]) + float64(beta[i])
		}
	}
	return x
}

// MLMLogits computes BertForMaskedLM's logits for one unpadded sequence:
// tokens × vocab, the head (dense, erf GELU, LayerNorm, decoder + bias)
// over the hidden states, the decoder tied to the word embeddings unless
// Untied.
func (b BERT) MLMLogits(ids []int32) [][]float64 {
	t := b.Tensors()
	head := func(n string) []float32 { return t.Values[n] }
	x := linear(head, "cls.predictions.transform.dense", b.HiddenStates(ids), b.Hidden, b.Hidden)
	for _, row := range x {
		for i, v := range row {
			row[i] = v * (1 + math.Erf(v/math.Sqrt2)) / 2
		}
	}
	x = b.norm(head, "cls.predictions.transform.LayerNorm", x)
	dec := t.Values[b.Prefix+"embeddings.word_embeddings.weight"]
	if b.Untied {
		dec = t.Values["cls.predictions.decoder.weight"]
	}
	bias := t.Values["cls.predictions.bias"]
	out := make([][]float64, len(x))
	for r, row := range x {
		out[r] = make([]float64, len(bias))
		for v := range bias {
			s := float64(bias[v])
			for i, xi := range row {
				s += float64(dec[v*b.Hidden+i]) * xi
			}
			out[r][v] = s
		}
	}
	return out
}
