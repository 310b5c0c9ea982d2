package ingest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/synapse-embed/synapse/io/readlimit"
)

// Sample is the text a quantized variant and its source both embed.
type Sample struct {
	Name  string // "built-in" or the file it was read from
	Texts []string
}

// DefaultSampleTexts is how many texts ReadSample takes when not told.
const DefaultSampleTexts = 64

// BuiltinSample is a fixed set of texts of varied length and kind: prose,
// abstracts, queries, code, numbers and a few other languages.
func BuiltinSample() Sample { return Sample{Name: "built-in", Texts: builtinTexts} }

var builtinTexts = []string{
	"What is the boiling point of water at high altitude?",
	"how do vaccines train the immune system",
	"Best practices for rotating database credentials",
	"The committee postponed its decision until the auditors had reviewed every invoice from the last fiscal year.",
	"Photosynthesis converts light energy into chemical energy. In the chloroplasts of plant cells, water is split, oxygen is released, and carbon dioxide is fixed into sugars through the Calvin cycle.",
	"Background: Chronic inflammation is associated with an increased risk of cardiovascular events. Methods: We followed 4,812 adults for a median of 7.3 years and measured C-reactive protein at baseline. Results: Participants in the highest quartile had a hazard ratio of 1.62 (95% CI 1.31-2.01) compared with the lowest quartile, after adjustment for age, sex, smoking and blood pressure. Conclusions: Elevated C-reactive protein independently predicts cardiovascular events in this cohort.",
	"A small bakery on the corner sells rye bread every morning before seven. The owner, who learned the recipe from her grandmother, refuses to use commercial yeast and keeps a sourdough starter that is older than most of her customers.",
	"func Sum(xs []float64) float64 {\n\tvar s float64\n\tfor _, x := range xs {\n\t\ts += x\n\t}\n\treturn s\n}",
	"SELECT customer_id, COUNT(*) AS orders FROM orders WHERE created_at >= '2024-01-01' GROUP BY customer_id HAVING COUNT(*) > 10 ORDER BY orders DESC;",
	"Error: connection refused (ECONNREFUSED) while contacting 10.0.3.17:5432 after 3 retries; check that the server is running and accepts TCP connections.",
	"The mitochondrion is the site of oxidative phosphorylation, where the electron transport chain creates a proton gradient across the inner membrane that drives ATP synthase.",
	"Quarterly revenue rose 12% to $4.3 billion, while operating margin narrowed by 80 basis points because of higher logistics costs and a one-time restructuring charge.",
	"Le conseil municipal a approuvé la rénovation de la bibliothèque, dont les travaux commenceront au printemps et dureront environ dix-huit mois.",
	"Die Messungen wurden bei einer Temperatur von 25 Grad Celsius und einem Druck von 101,3 Kilopascal durchgeführt.",
	"El estudio incluyó a trescientos pacientes con diabetes tipo 2 que recibieron el tratamiento durante doce semanas.",
	"Tokyo, Kyoto and Osaka are connected by high-speed rail; the trip from Tokyo to Osaka takes about two and a half hours.",
	"In 1905 Einstein published four papers: on the photoelectric effect, Brownian motion, special relativity, and the equivalence of mass and energy, E = mc^2.",
	"Gene expression profiling of 212 tumour samples identified three molecular subtypes with distinct survival, and the subtype assignment was reproduced in an independent validation cohort of 158 patients. Mutations in TP53 were enriched in the most aggressive subtype, whereas the subtype with the best prognosis showed high expression of immune-related genes and dense lymphocytic infiltration. These findings suggest that transcriptional subtypes capture clinically relevant biology beyond histological grade and may help select patients for adjuvant therapy.",
	"Install the package, set the environment variable, and restart the service; the new configuration takes effect without a reboot.",
	"Rain is expected tomorrow afternoon with winds from the south-west at 30 km/h.",
	"The defendant argued that the contract was void because one of its essential terms had never been agreed, but the court held that the parties' conduct showed a binding agreement.",
	"Batch inference reads documents, splits them into token windows, embeds each window with a transformer encoder, pools the token states into one vector per window, and writes the vectors next to their document identifiers.",
	"ok",
	"Protein folding is guided by hydrophobic collapse: nonpolar side chains cluster away from water, and hydrogen bonds then stabilise the secondary structure of helices and sheets. Chaperones prevent aggregation of partially folded intermediates, especially under heat stress, and misfolded proteins are tagged with ubiquitin and degraded by the proteasome. Failures of this quality control are implicated in several neurodegenerative diseases, in which aggregates of amyloid or tau accumulate in neurons over decades.",
}

// ReadSample reads up to limit texts (DefaultSampleTexts when limit ≤ 0)
// from a JSON Lines file of objects with a "text" string, such as a corpus to
// be embedded; blank lines are skipped. A line that is not such an object is
// an error naming the file and line, and so is a line longer than
// readlimit.Line.
func ReadSample(path string, limit int) (Sample, error) {
	if limit <= 0 {
		limit = DefaultSampleTexts
	}
	fh, err := readlimit.Open(path)
	if err != nil {
		return Sample{}, fmt.Errorf("sample: %w", err)
	}
	defer fh.Close()
	r := bufio.NewReaderSize(fh, 1<<16)
	s := Sample{Name: path}
	for line := 1; len(s.Texts) < limit; line++ {
		b, err := readlimit.ReadLine(r, fmt.Sprintf("sample %s:%d", path, line), readlimit.Line)
		if errors.Is(err, readlimit.ErrTooLarge) {
			return Sample{}, err
		}
		if len(strings.TrimSpace(string(b))) > 0 {
			var rec struct {
				Text *string `json:"text"`
			}
			if jerr := json.Unmarshal(b, &rec); jerr != nil || rec.Text == nil {
				return Sample{}, fmt.Errorf("sample %s:%d: want a JSON object with a \"text\" string", path, line)
			}
			if strings.TrimSpace(*rec.Text) != "" {
				s.Texts = append(s.Texts, *rec.Text)
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Sample{}, fmt.Errorf("sample %s: %w", path, err)
		}
	}
	if len(s.Texts) == 0 {
		return Sample{}, fmt.Errorf("sample %s: no texts", path)
	}
	return s, nil
}
