package onnx

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
)

// Dynamic int8 quantization, the graph onnxruntime.quantization.quantize_dynamic
// writes with per_channel=True and reduce_range=True (per-column symmetric
// 7-bit weights, uint8 activations quantized at run time). Per tensor, its default, one outlier
// column sets the step of the whole matrix: on all-MiniLM-L6-v2's ONNX export
// (models add --quantize int8, cosine to the float graph over the 24
// built-in texts) per tensor gave min 0.849 / mean 0.952, per column min
// 0.974 / mean 0.993. Each MatMul whose B is a constant 2-D
// float32 initializer,
//
//	Y = MatMul(A, W)
//
// becomes
//
//	A_quantized, A_scale, A_zero_point = DynamicQuantizeLinear(A)   (once per A)
//	Y_output_quantized = MatMulInteger(A_quantized, W_quantized, A_zero_point, W_zero_point)
//	Y_output_quantized_cast_output = Cast(Y_output_quantized, to=float)
//	S = Mul(A_scale, W_scale)
//	Y = Mul(Y_output_quantized_cast_output, S)
//
// with W_quantized = clip(round_half_even(W / W_scale), -64, 64) as int8
// (7-bit weights: WeightMax says why), W_scale[n] = max|W[:, n]| / 64 per
// column n (1 for an all-zero column)
// and W_zero_point = 0 per column; S is then a vector broadcast over Y's last
// dimension. A Gemm
// (transA = 0) with such a B is rewritten the same way, alpha folded into
// W_scale, transB applied to the stored weight, and beta·C added after.
// Every other node, initializer, input, output, value_info, opset import and
// metadata field is copied byte for byte; the float weights no other node
// uses are dropped. Nodes inside subgraphs (If, Loop, Scan) are not
// rewritten.

// FTypeInt8 is the one target an ONNX graph is quantized to (QUANTIZE's
// ftype, --quantize int8): int8 weights of its MatMul and Gemm layers,
// activations quantized at run time.
const FTypeInt8 = "int8"

// ErrCannotQuantize marks a model QuantizeDynamic does not rewrite: nothing
// eligible, external data, an opset below 11, a graph quantized already.
var ErrCannotQuantize = errors.New("cannot quantize this ONNX model")

// QuantizeReport says what QuantizeDynamic changed.
type QuantizeReport struct {
	MatMuls, Gemms int   // nodes rewritten
	Weights        int   // weight initializers quantized (shared ones once)
	Activations    int   // DynamicQuantizeLinear nodes added (one per distinct A)
	Skipped        int   // MatMul and Gemm nodes left in float (B not a constant 2-D float32 weight, or in a subgraph)
	FloatBytes     int64 // bytes of the float weights replaced
	Int8Bytes      int64 // bytes of their int8 copies
	InBytes        int64 // the model's size
	OutBytes       int64 // the quantized model's size
}

func (r QuantizeReport) String() string {
	return fmt.Sprintf("%d MatMul and %d Gemm nodes quantized (%d weights, %.1f MB float → %.1f MB int8; %d activations quantized at run time), %d left in float",
		r.MatMuls, r.Gemms, r.Weights, float64(r.FloatBytes)/1e6, float64(r.Int8Bytes)/1e6, r.Activations, r.Skipped)
}

// QuantizeFile writes the dynamically quantized form of the model at src to
// dst, a new file (an existing dst is an error), synced before it returns.
// On any failure dst is removed.
func QuantizeFile(src, dst string) (QuantizeReport, error) {
	b, release, err := mapFile(src)
	if err != nil {
		return QuantizeReport{}, fmt.Errorf("onnx: %w", err)
	}
	defer release()
	out, rep, err := QuantizeDynamic(b)
	if err != nil {
		return rep, fmt.Errorf("onnx: %s: %w", src, err)
	}
	fh, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return rep, fmt.Errorf("onnx: %w", err)
	}
	_, err = fh.Write(out)
	if err == nil {
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dst)
		return rep, fmt.Errorf("onnx: write %s: %w", dst, err)
	}
	return rep, nil
}

// CheckQuantize reports what QuantizeDynamic would do with the model at
// path, reading its structure and weights but writing nothing; a model it
// would refuse is ErrCannotQuantize.
func CheckQuantize(path string) (QuantizeReport, error) {
	b, release, err := mapFile(path)
	if err != nil {
		return QuantizeReport{}, fmt.Errorf("onnx: %w", err)
	}
	defer release()
	m, err := parseModel(b)
	if err != nil {
		return QuantizeReport{}, fmt.Errorf("onnx: %s: %w", path, err)
	}
	q, err := m.plan()
	if err != nil {
		return QuantizeReport{}, fmt.Errorf("onnx: %s: %w", path, err)
	}
	return q.rep, nil
}

// QuantizeDynamic returns the serialized ModelProto b with its eligible
// MatMul and Gemm nodes dynamically quantized to int8 (see the comment at
// the top of this file).
func QuantizeDynamic(b []byte) ([]byte, QuantizeReport, error) {
	m, err := parseModel(b)
	if err != nil {
		return nil, QuantizeReport{}, err
	}
	q, err := m.plan()
	if err != nil {
		return nil, QuantizeReport{}, err
	}
	graph, err := q.rewrite()
	if err != nil {
		return nil, q.rep, err
	}
	out := make([]byte, 0, len(b)/3)
	for _, f := range m.fields {
		if f.num == 7 && f.typ == protowire.BytesType {
			out = appendBytes(out, 7, graph)
			continue
		}
		out = append(out, f.raw...)
	}
	q.rep.InBytes, q.rep.OutBytes = int64(len(b)), int64(len(out))
	return out, q.rep, nil
}

// rawField is one field of a message: its number and wire type, its value
// (the bytes of a length-delimited field, x for the others) and its whole
// encoding, tag included, for copying it unchanged.
type rawField struct {
	num protowire.Number
	typ protowire.Type
	v   []byte
	x   uint64
	raw []byte
}

func rawFields(b []byte) ([]rawField, error) {
	var out []rawField
	for len(b) > 0 {
		start := b
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		f := rawField{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.x, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			f.v, n = protowire.ConsumeBytes(b)
		case protowire.Fixed32Type:
			var u uint32
			u, n = protowire.ConsumeFixed32(b)
			f.x = uint64(u)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		f.raw = start[:len(start)-len(b)]
		out = append(out, f)
	}
	return out, nil
}

// qmodel is a ModelProto parsed for rewriting.
type qmodel struct {
	fields []rawField // top level, in order
	opset  int64      // ai.onnx
	graph  []rawField
	nodes  []qnode
	inits  map[string]*qinit
	names  map[string]bool // every value name of the graph
	uses   map[string]int  // uses of a value: node inputs (subgraphs included) and graph outputs
	inputs map[string]bool // graph inputs (an initializer listed there can be overridden)
}

type qnode struct {
	field    int // index in graph
	name, op string
	domain   string
	inputs   []string
	outputs  []string
	attrs    map[string]rawField // AttributeProto fields by attribute name: i=3, f=2
	subgraph bool
}

type qinit struct {
	name     string
	dims     []int64
	elem     ElemType
	raw      []byte // raw_data
	floats   []byte // float_data, packed little-endian
	external bool
}

func parseModel(b []byte) (*qmodel, error) {
	fs, err := rawFields(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	m := &qmodel{fields: fs, opset: -1, inits: map[string]*qinit{}, names: map[string]bool{}, uses: map[string]int{}, inputs: map[string]bool{}}
	var graph []byte
	ir := false
	for _, f := range fs {
		switch {
		case f.num == 1 && f.typ == protowire.VarintType:
			ir = f.x > 0
		case f.num == 7 && f.typ == protowire.BytesType:
			if graph != nil {
				return nil, fmt.Errorf("%w: two graphs", ErrFormat)
			}
			graph = f.v
		case f.num == 8 && f.typ == protowire.BytesType:
			ops := map[string]int64{}
			if err := parseOpset(f.v, ops); err != nil {
				return nil, fmt.Errorf("%w: opset_import: %w", ErrFormat, err)
			}
			if v, ok := ops[""]; ok {
				m.opset = v
			}
		}
	}
	if graph == nil || !ir {
		return nil, fmt.Errorf("%w: no graph or no ir_version (not a ModelProto)", ErrFormat)
	}
	if err := m.parseGraph(graph); err != nil {
		return nil, fmt.Errorf("%w: graph: %w", ErrFormat, err)
	}
	return m, nil
}

func (m *qmodel) parseGraph(b []byte) error {
	fs, err := rawFields(b)
	if err != nil {
		return err
	}
	m.graph = fs
	for i, f := range fs {
		if f.typ != protowire.BytesType {
			continue
		}
		switch f.num {
		case 1:
			n, err := m.parseNode(f.v)
			if err != nil {
				return fmt.Errorf("node %d: %w", len(m.nodes), err)
			}
			n.field = i
			m.nodes = append(m.nodes, n)
		case 5:
			t, err := parseQInit(f.v)
			if err != nil {
				return fmt.Errorf("initializer: %w", err)
			}
			m.inits[t.name] = t
			m.names[t.name] = true
		case 11, 12:
			v, err := parseValueInfo(f.v)
			if err != nil {
				return err
			}
			m.names[v.Name] = true
			if f.num == 11 {
				m.inputs[v.Name] = true
			} else {
				m.uses[v.Name]++
			}
		}
	}
	return nil
}

func (m *qmodel) parseNode(b []byte) (qnode, error) {
	n := qnode{attrs: map[string]rawField{}}
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case 1:
			n.inputs = append(n.inputs, string(v))
			m.uses[string(v)]++
		case 2:
			n.outputs = append(n.outputs, string(v))
			m.names[string(v)] = true
		case 3:
			n.name = string(v)
		case 4:
			n.op = string(v)
		case 7:
			n.domain = string(v)
		case 5:
			return m.parseAttr(v, &n)
		}
		return nil
	})
	if n.domain == "ai.onnx" {
		n.domain = ""
	}
	return n, err
}

// parseAttr records a node attribute, and counts the values a subgraph
// attribute (g=6, graphs=11) uses as uses from outside.
func (m *qmodel) parseAttr(b []byte, n *qnode) error {
	fs, err := rawFields(b)
	if err != nil {
		return err
	}
	var name string
	for _, f := range fs {
		switch {
		case f.num == 1 && f.typ == protowire.BytesType:
			name = string(f.v)
		case (f.num == 6 || f.num == 11) && f.typ == protowire.BytesType:
			n.subgraph = true
			if err := m.subgraphUses(f.v); err != nil {
				return err
			}
		}
	}
	for _, f := range fs {
		if f.num == 2 || f.num == 3 {
			n.attrs[name] = f
		}
	}
	return nil
}

// subgraphUses counts every name a subgraph's nodes read (its own values
// included: counting too many uses only keeps a float weight).
func (m *qmodel) subgraphUses(b []byte) error {
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != 1 || typ != protowire.BytesType {
			return nil
		}
		return fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
			switch {
			case num == 1 && typ == protowire.BytesType:
				m.uses[string(v)]++
			case num == 2 && typ == protowire.BytesType:
				m.names[string(v)] = true
			case num == 5 && typ == protowire.BytesType:
				return fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
					if (num == 6 || num == 11) && typ == protowire.BytesType {
						return m.subgraphUses(v)
					}
					return nil
				})
			}
			return nil
		})
	})
}

func parseQInit(b []byte) (*qinit, error) {
	t := &qinit{}
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == 1 && typ == protowire.VarintType:
			t.dims = append(t.dims, int64(x))
		case num == 1 && typ == protowire.BytesType:
			for len(v) > 0 {
				d, n := protowire.ConsumeVarint(v)
				if n < 0 {
					return protowire.ParseError(n)
				}
				t.dims, v = append(t.dims, int64(d)), v[n:]
			}
		case num == 2 && typ == protowire.VarintType:
			t.elem = ElemType(x)
		case num == 4 && typ == protowire.BytesType:
			t.floats = append(t.floats, v...)
		case num == 4 && typ == protowire.Fixed32Type:
			t.floats = binary.LittleEndian.AppendUint32(t.floats, uint32(x))
		case num == 8 && typ == protowire.BytesType:
			t.name = string(v)
		case num == 9 && typ == protowire.BytesType:
			t.raw = v
		case num == 14 && typ == protowire.VarintType && x == 1:
			t.external = true
		}
		return nil
	})
	return t, err
}

// weights returns a float32 initializer's values, checked against its dims.
func (t *qinit) weights() ([]float32, error) {
	n := int64(1)
	for _, d := range t.dims {
		n *= d
	}
	data := t.raw
	if data == nil {
		data = t.floats
	}
	if int64(len(data)) != 4*n {
		return nil, fmt.Errorf("initializer %s: %d bytes of data for %v float32 values", t.name, len(data), t.dims)
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		if f := float64(out[i]); math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("initializer %s: value %d is %v", t.name, i, out[i])
		}
	}
	return out, nil
}

// eligible returns the weight initializer of a MatMul or Gemm node the
// quantizer rewrites, or nil.
func (m *qmodel) eligible(n qnode) *qinit {
	if n.domain != "" || n.subgraph || len(n.outputs) != 1 {
		return nil
	}
	switch {
	case n.op == "MatMul" && len(n.inputs) == 2:
	case n.op == "Gemm" && (len(n.inputs) == 2 || len(n.inputs) == 3) && nodeAttrInt(n, "transA", 0) == 0:
	default:
		return nil
	}
	w, ok := m.inits[n.inputs[1]]
	if !ok || m.inputs[w.name] || w.external || w.elem != Float || len(w.dims) != 2 || w.dims[0] <= 0 || w.dims[1] <= 0 {
		return nil
	}
	if _, constA := m.inits[n.inputs[0]]; constA || n.inputs[0] == "" {
		return nil
	}
	return w
}

func nodeAttrInt(n qnode, name string, def int64) int64 {
	if f, ok := n.attrs[name]; ok && f.num == 3 && f.typ == protowire.VarintType {
		return int64(f.x)
	}
	return def
}

func nodeAttrFloat(n qnode, name string, def float32) float32 {
	if f, ok := n.attrs[name]; ok && f.num == 2 && f.typ == protowire.Fixed32Type {
		return math.Float32frombits(uint32(f.x))
	}
	return def
}

// quantizer is a planned rewrite.
type quantizer struct {
	m        *qmodel
	rep      QuantizeReport
	targets  map[int]*qinit // node index → its weight
	dropped  map[string]bool
	fresh    map[string]bool
	acts     map[string][3]string // activation → its quantized, scale and zero point values
	weights  map[weightKey][3]string
	newInits []Tensor
}

type weightKey struct {
	name   string
	transB bool
	alpha  float32
}

// plan picks the nodes to rewrite and refuses models it cannot handle.
func (m *qmodel) plan() (*quantizer, error) {
	q := &quantizer{m: m, targets: map[int]*qinit{}, dropped: map[string]bool{}, fresh: map[string]bool{},
		acts: map[string][3]string{}, weights: map[weightKey][3]string{}}
	weightUses := map[string]int{}
	for i, n := range m.nodes {
		op := n.op
		if n.domain != "" {
			op = n.domain + "." + op
		}
		if slices.Contains(quantizedOps, op) {
			return nil, fmt.Errorf("%w: the graph is quantized already (it has a %s node)", ErrCannotQuantize, n.op)
		}
		w := m.eligible(n)
		if w == nil {
			if n.op == "MatMul" || n.op == "Gemm" {
				q.rep.Skipped++
			}
			continue
		}
		q.targets[i] = w
		weightUses[w.name]++
		if n.op == "Gemm" {
			q.rep.Gemms++
		} else {
			q.rep.MatMuls++
		}
	}
	for _, t := range m.inits {
		if t.external {
			return nil, fmt.Errorf("%w: initializer %s keeps its data in an external file; synapse quantizes self-contained .onnx files (under 2 GB)", ErrCannotQuantize, t.name)
		}
	}
	switch {
	case len(q.targets) == 0:
		return nil, fmt.Errorf("%w: nothing to quantize: no MatMul or Gemm node has a constant 2-D float32 weight (%d left as they are)", ErrCannotQuantize, q.rep.Skipped)
	case m.opset < 11:
		return nil, fmt.Errorf("%w: ai.onnx opset %d; DynamicQuantizeLinear needs opset 11 or later", ErrCannotQuantize, m.opset)
	}
	for name, n := range weightUses {
		if m.uses[name] == n { // no other node, subgraph or graph output reads it
			q.dropped[name] = true
		}
	}
	seen := map[string]bool{}
	for _, w := range q.targets {
		if !seen[w.name] {
			seen[w.name] = true
			q.rep.FloatBytes += 4 * w.dims[0] * w.dims[1]
		}
	}
	return q, nil
}

// name returns base, or base with a numeric suffix when the graph has a
// value of that name already.
func (q *quantizer) name(base string) string {
	s := base
	for i := 1; q.m.names[s] || q.fresh[s]; i++ {
		s = fmt.Sprintf("%s_%d", base, i)
	}
	q.fresh[s] = true
	return s
}

// rewrite returns the new GraphProto's bytes.
func (q *quantizer) rewrite() ([]byte, error) {
	m := q.m
	byField := map[int]int{}
	for i, n := range m.nodes {
		byField[n.field] = i
	}
	var out []byte
	for i, f := range m.graph {
		if f.num == 5 && f.typ == protowire.BytesType {
			if t, err := parseQInit(f.v); err == nil && q.dropped[t.name] {
				continue
			}
		}
		ni, isNode := byField[i]
		w := q.targets[ni]
		if f.num != 1 || f.typ != protowire.BytesType || !isNode || w == nil {
			out = append(out, f.raw...)
			continue
		}
		nodes, err := q.replace(m.nodes[ni], w)
		if err != nil {
			return nil, err
		}
		for _, n := range nodes {
			out = appendBytes(out, 1, n.marshal())
		}
	}
	for _, t := range q.newInits {
		out = appendBytes(out, 5, t.marshal())
	}
	return out, nil
}

// replace returns the nodes that compute what n computed.
func (q *quantizer) replace(n qnode, w *qinit) ([]Node, error) {
	var nodes []Node
	a := n.inputs[0]
	act, ok := q.acts[a]
	if !ok {
		act = [3]string{q.name(a + "_quantized"), q.name(a + "_scale"), q.name(a + "_zero_point")}
		q.acts[a] = act
		q.rep.Activations++
		nodes = append(nodes, Node{Name: q.name(a + "_QuantizeLinear"), Op: "DynamicQuantizeLinear", Inputs: []string{a}, Outputs: act[:]})
	}
	key := weightKey{name: w.name}
	if n.op == "Gemm" {
		key.transB, key.alpha = nodeAttrInt(n, "transB", 0) != 0, nodeAttrFloat(n, "alpha", 1)
	}
	wq, err := q.weight(key, w)
	if err != nil {
		return nil, err
	}
	y := n.outputs[0]
	base := n.name
	if base == "" {
		base = y
	}
	mmName := q.name(base + "_quant")
	acc := q.name(y + "_output_quantized")
	cast := q.name(acc + "_cast_output")
	scales := q.name(mmName + "_scales_mul:0")
	prod := y
	if n.op == "Gemm" && len(n.inputs) == 3 && n.inputs[2] != "" {
		prod = q.name(y + "_matmul")
	}
	nodes = append(nodes,
		Node{Name: mmName, Op: "MatMulInteger", Inputs: []string{act[0], wq[0], act[2], wq[2]}, Outputs: []string{acc}},
		Node{Name: q.name(acc + "_cast"), Op: "Cast", Inputs: []string{acc}, Outputs: []string{cast}, Attrs: []Attr{IntAttr("to", int64(Float))}},
		Node{Name: q.name(mmName + "_scales_mul"), Op: "Mul", Inputs: []string{act[1], wq[1]}, Outputs: []string{scales}},
		Node{Name: q.name(mmName + "_output_scale_mul"), Op: "Mul", Inputs: []string{cast, scales}, Outputs: []string{prod}})
	if prod != y {
		nodes = append(nodes, q.gemmBias(n, prod)...)
	}
	return nodes, nil
}

// gemmBias adds beta·C to a rewritten Gemm's product.
func (q *quantizer) gemmBias(n qnode, prod string) []Node {
	c, y := n.inputs[2], n.outputs[0]
	var nodes []Node
	if beta := nodeAttrFloat(n, "beta", 1); beta != 1 {
		bn := q.name(y + "_beta")
		q.newInits = append(q.newInits, Tensor{Name: bn, Floats: []float32{beta}})
		scaled := q.name(y + "_beta_c")
		nodes = append(nodes, Node{Name: scaled, Op: "Mul", Inputs: []string{c, bn}, Outputs: []string{scaled}})
		c = scaled
	}
	return append(nodes, Node{Name: q.name(y + "_bias_add"), Op: "Add", Inputs: []string{prod, c}, Outputs: []string{y}})
}

// weight returns the names of w's int8 copy, scale and zero point, writing
// them on first use.
func (q *quantizer) weight(key weightKey, w *qinit) ([3]string, error) {
	if names, ok := q.weights[key]; ok {
		return names, nil
	}
	vals, err := w.weights()
	if err != nil {
		return [3]string{}, fmt.Errorf("%w: %w", ErrCannotQuantize, err)
	}
	rows, cols := w.dims[0], w.dims[1]
	if key.transB { // Gemm's B is [N, K]: store [K, N] for MatMulInteger
		t := make([]float32, len(vals))
		for r := range rows {
			for c := range cols {
				t[c*rows+r] = vals[r*cols+c]
			}
		}
		vals, rows, cols = t, cols, rows
	}
	data, scales := QuantizePerColumn(vals, int(rows), int(cols))
	base := w.name
	if key.transB || key.alpha != 0 && key.alpha != 1 {
		base = q.name(w.name + "_gemm")
	}
	names := [3]string{q.name(base + "_quantized"), q.name(base + "_scale"), q.name(base + "_zero_point")}
	if key.alpha != 0 && key.alpha != 1 {
		for i := range scales {
			scales[i] *= key.alpha
		}
	}
	raw := make([]byte, len(data))
	for i, v := range data {
		raw[i] = byte(v)
	}
	q.newInits = append(q.newInits,
		Tensor{Name: names[0], Dims: []int64{rows, cols}, Elem: Int8, Raw: raw},
		Tensor{Name: names[1], Dims: []int64{cols}, Floats: scales},
		Tensor{Name: names[2], Dims: []int64{cols}, Elem: Int8, Raw: make([]byte, cols)})
	q.weights[key] = names
	q.rep.Weights++
	q.rep.Int8Bytes += int64(len(raw))
	return names, nil
}

// QuantizePerColumn quantizes a [rows, cols] weight (row-major, the B of
// MatMulInteger: one column per output feature) per column: each column is
// QuantizeSymmetric of its own values, so a column of small weights keeps
// its precision beside one of large weights. It returns the int8 weights in
// w's layout and one scale per column.
func QuantizePerColumn(w []float32, rows, cols int) ([]int8, []float32) {
	out := make([]int8, len(w))
	scales := make([]float32, cols)
	col := make([]float32, rows)
	for c := range cols {
		for r := range rows {
			col[r] = w[r*cols+c]
		}
		q, scale := QuantizeSymmetric(col)
		for r := range rows {
			out[r*cols+c] = q[r]
		}
		scales[c] = scale
	}
	return out, scales
}

// WeightMax is the largest magnitude of a quantized weight: 7-bit weights
// in [-64, 64], as onnxruntime's quantizer writes them with reduce_range.
// ONNX Runtime's uint8 × int8 kernels on x86-64 CPUs without VNNI (AVX2,
// and AVX-512 without VNNI) multiply with vpmaddubsw, which adds two
// products of a uint8 activation and an int8 weight in a saturating int16:
// with 8-bit weights 255·127·2 = 64,770 overflows it, and the vectors move
// with the CPU (the random-weight BERT of the fixtures: worst cosine to
// float32 0.984 on AVX2 against 0.998 with VNNI). With |w| ≤ 64 a pair is
// at most 255·64·2 = 32,640, so every kernel (AVX2, AVX-512, AVX-512 VNNI,
// AVX-VNNI, AMX) sums the same exact int32s and the graph's result does not
// depend on the CPU it runs on (docs/onnx.md, "int8 on every CPU"). uint8
// weights would do the same, but ONNX Runtime 1.30 runs uint8 × uint8 on a
// widening kernel: 1.2× float32 against 2.7× on the Xeon it was measured on.
const WeightMax = 64

// QuantizeSymmetric quantizes w per tensor to 7-bit symmetric int8 as
// onnxruntime's quantizer does for QInt8 weights with reduce_range:
// scale = max|w| / WeightMax (the float32 of 2·max|w| / (2·WeightMax); 1
// when w is all zeros), and each value round-half-even(w / scale),
// computed in float32, clipped to [-WeightMax, WeightMax].
func QuantizeSymmetric(w []float32) ([]int8, float32) {
	var absmax float32
	for _, v := range w {
		absmax = max(absmax, float32(math.Abs(float64(v))))
	}
	scale := float32(float64(absmax) * 2 / (2 * WeightMax))
	if scale < math.SmallestNonzeroFloat32*(1<<23) { // below float32's smallest normal, as numpy's finfo.tiny
		scale = 1
	}
	out := make([]int8, len(w))
	for i, v := range w {
		x := math.RoundToEven(float64(v / scale))
		out[i] = int8(min(max(x, -WeightMax), WeightMax))
	}
	return out, scale
}
