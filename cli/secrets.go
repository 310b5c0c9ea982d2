package cli

import (
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
// that is set with "[NAME]".
func scrubSecrets(msg string) string {
	for _, name := range secretEnv {
		for _, v := range []string{os.Getenv(name), strings.TrimSpace(os.Getenv(name))} {
			if v != "" {
				msg = strings.ReplaceAll(msg, v, "["+name+"]")
			}
		}
	}
	return msg
}
