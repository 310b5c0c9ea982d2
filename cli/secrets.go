package cli

import (
	"encoding/json"
	"io"
	"os"
	"strings"
)

// secretEnv names the environment variables whose values are secrets that
// synapse never prints: the Hub's access token and libpq's password. A
// message can carry one from anywhere — a server's error body that echoes
// the request's Authorization header, a library's error — so every line
// synapse writes from an error or a log passes through scrubSecrets.
var secretEnv = []string{"HF_TOKEN", "PGPASSWORD"}

// scrubSecrets replaces, in msg, the value of every variable of secretEnv
// that is set with "[NAME]": as it is, trimmed, and as a JSON string
// spells it (a JSON log record's).
func scrubSecrets(msg string) string {
	for _, name := range secretEnv {
		v := os.Getenv(name)
		quoted, _ := json.Marshal(v)
		for _, form := range []string{v, strings.TrimSpace(v), strings.Trim(string(quoted), `"`)} {
			if form != "" {
				msg = strings.ReplaceAll(msg, form, "["+name+"]")
			}
		}
	}
	return msg
}

// scrubWriter passes each write through scrubSecrets: a job's log, whose
// records and notes are written whole, one line per write.
type scrubWriter struct{ w io.Writer }

func (s scrubWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(s.w, scrubSecrets(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
