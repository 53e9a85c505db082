package handlers_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/memory-mcp/memory-mcp/handlers"
	"github.com/memory-mcp/memory-mcp/vfs/files"
)

// Realistic credentials (the right formats, made-up values), each refused with its kind and
// line; ordinary notes and code, including near misses, accepted.
func TestSecretGuard(t *testing.T) {
	rsa := "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MfszrRm9jNEv8ZSf\n-----END RSA PRIVATE KEY-----"
	refused := []struct {
		name, text, kind string
		line             int
	}{
		{"RSA private key", "deploy key:\n" + rsa, "private key", 2},
		{"OpenSSH private key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----", "private key", 1},
		{"EC private key", "x\ny\n-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg", "private key", 3},
		{"AWS access key", "aws_access_key_id = AKIAZ3MSJV4WWFZ7QHN4", "Amazon Web Services access key", 1},
		{"AWS secret access key", "[default]\naws_secret_access_key = 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", "Amazon Web Services secret access key", 2},
		{"GitHub classic token", "export GITHUB_TOKEN=ghp_R7xK2mP9qL4vN8wT3yB6cF1hJ5sD0gA2eZ4u", "GitHub token", 1},
		{"GitHub fine-grained token", "github_pat_11ABCDEFG0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdef", "GitHub token", 1},
		{"GitLab token", "token: glpat-x7Kp2Rm9Qw4Ln8Tz3Yb6", "GitLab token", 1},
		{"Anthropic key", "ANTHROPIC_API_KEY=sk-ant-api03-" + strings.Repeat("Ab3dE", 19) + "-xyzAA", "key for the Anthropic API", 1},
		{"OpenAI project key", "OPENAI_API_KEY=\"sk-proj-" + strings.Repeat("q8Zr2LmX", 7) + "\"", "key for the OpenAI API", 1},
		{"Google API key", "maps key AIzaSyD3xK9mP2qL7vN4wT8yB1cF6hJ0sG5eR2u", "Google API key", 1},
		{"Slack bot token", "SLACK_BOT_TOKEN=xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "Slack token", 1},
		{"Slack webhook", "alerts go to https://hooks.slack.com/services/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", "Slack webhook URL", 1},
		{"Stripe live key", "stripe.api_key = 'sk_live_51H7xK2mP9qL4vN8wT3yB6cF1'", "Stripe secret key", 1},
		{"SendGrid key", "SG.aB3dE5gH7jK9mN1pQ3sT5v.wX7yZ9bC1dF3hJ5kL7nP9rS1tV3xZ5aC7eG9iK1mO3qU", "SendGrid API key", 1},
		{"npm token", "//registry.npmjs.org/:_authToken=npm_aB3dE5gH7jK9mN1pQ3sT5vW7xZ9bC1dF3hJ5", "token for the npm registry", 1},
		{"Hugging Face token", "HF_TOKEN=hf_aBcDeFgHiJkLmNoPqRsTuVwXyZaBcDeFgH", "Hugging Face token", 1},
		{"DigitalOcean token", "dop_v1_" + strings.Repeat("3f9e2b7c", 8), "DigitalOcean token", 1},
		{"Azure storage key", "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" + strings.Repeat("Ab3dE5gH7j", 8) + "K9mN1pQ3sT==;", "storage account key for Azure", 1},
		{"JWT", "Authorization: Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "JSON Web Token", 1},
		{"Postgres URL", "# db\nDATABASE_URL=postgres://admin:S3cr3tP4ss@db.internal:5432/app", "password in a connection string", 2},
		{"MongoDB URL", "mongodb+srv://app:hunter2hunter2@cluster0.ab1cd.mongodb.net/prod", "password in a connection string", 1},
	}
	accepted := []struct{ name, text string }{
		{"plain notes", "# Project notes\n- the user prefers tabs\n- never deploy on Fridays\n"},
		{"env lookup in Go", `password := os.Getenv("DB_PASSWORD")`},
		{"variable in a URL", "DATABASE_URL=postgres://app:${DB_PASSWORD}@db:5432/app"},
		{"placeholder password", "postgres://user:password@localhost/db"},
		{"angle-bracket placeholder", "mysql://root:<password>@127.0.0.1:3306/test"},
		{"starred password", "amqp://guest:****@rabbit:5672/"},
		{"URL without a password", "redis://localhost:6379/0 and https://user@github.com/org/repo.git"},
		{"where the key is kept", "The OpenAI key is in 1Password under 'OpenAI prod'; rotate it monthly."},
		{"AWS documentation example", "e.g. AKIAIOSFODNN7EXAMPLE and wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
		{"public key", "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----"},
		{"certificate", "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----"},
		{"git commit", "fixed in commit 3f9e2b7c1a4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f"},
		{"UUID and hash", "run 550e8400-e29b-41d4-a716-446655440000, sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"sk- in words", "use sk-learn? no: scikit-learn; task-list and disk-usage are fine"},
		{"API key from the environment", `client = anthropic.Anthropic(api_key=os.environ["ANTHROPIC_API_KEY"])`},
		{"JSON config", `{"theme": "dark", "retries": 3, "token_ttl": "15m"}`},
		{"talking about JWTs", "A JWT header starts with eyJ, which is base64 for {\" — decode it with jq."},
		{"talking about AWS", "aws s3 cp s3://bucket/key . # the AWS secret rotation runs every 90 days"},
		{"talking about Slack", "xoxb tokens are for bots, xoxp for users; ask ops for one."},
		{"ssh remote", "git remote add origin git@github.com:acme/app.git"},
		{"markdown table", "| service | port |\n|---|---|\n| api | 8080 |"},
		{"go struct", "type Config struct {\n\tPassword string `json:\"password\"`\n}"},
	}
	if len(refused) < 15 || len(accepted) < 15 {
		t.Fatalf("the table needs at least 15 of each: %d refused, %d accepted", len(refused), len(accepted))
	}
	ctx := context.Background()
	for _, tt := range refused {
		h := handlers.New(files.NewMemoryStore(), handlers.DefaultLimits(), handlers.RejectSecrets())
		a := "a "
		if strings.ContainsAny(tt.kind[:1], "AEIOUaeiou") {
			a = "an "
		}
		want := "Error: The text contains what looks like " + a + tt.kind + " on line " + strconv.Itoa(tt.line) + "; memory files must not store credentials. Remove it and try again."
		for _, call := range []map[string]any{
			{"command": "create", "path": "/memories/x.md", "file_text": tt.text},
			{"command": "insert", "path": "/memories/base.md", "insert_line": float64(0), "insert_text": tt.text},
			{"command": "str_replace", "path": "/memories/base.md", "old_str": "base", "new_str": tt.text},
		} {
			h.Exec(ctx, map[string]any{"command": "create", "path": "/memories/base.md", "file_text": "base"})
			res := h.Exec(ctx, call)
			if !res.IsError || res.Text != want {
				t.Errorf("%s, %s:\n got %q\nwant %q", tt.name, call["command"], res.Text, want)
			}
		}
		view := h.Exec(ctx, map[string]any{"command": "view", "path": "/memories"})
		if strings.Contains(view.Text, "x.md") || h.Exec(ctx, map[string]any{"command": "view", "path": "/memories/base.md"}).Text != "Here's the content of /memories/base.md with line numbers:\n     1\tbase" {
			t.Errorf("%s: something was written", tt.name)
		}
	}
	for _, tt := range accepted {
		h := handlers.New(files.NewMemoryStore(), handlers.DefaultLimits(), handlers.RejectSecrets())
		if res := h.Exec(ctx, map[string]any{"command": "create", "path": "/memories/x.md", "file_text": tt.text}); res.IsError {
			t.Errorf("%s: refused: %s", tt.name, res.Text)
		}
	}
	// With the guard off, a credential is stored like any text.
	h := handlers.New(files.NewMemoryStore(), handlers.DefaultLimits(), handlers.AllowSecrets())
	if res := h.Exec(ctx, map[string]any{"command": "create", "path": "/memories/x.md", "file_text": rsa}); res.IsError {
		t.Errorf("guard off: %s", res.Text)
	}
}

// A read-only store refuses every change with the exact message and still serves view.
func TestReadOnly(t *testing.T) {
	h := handlers.New(files.NewMemoryStore(), handlers.DefaultLimits(), handlers.ReadOnly())
	ctx := context.Background()
	for _, call := range []map[string]any{
		{"command": "create", "path": "/memories/a.md", "file_text": "x"},
		{"command": "str_replace", "path": "/memories/a.md", "old_str": "x"},
		{"command": "insert", "path": "/memories/a.md", "insert_line": float64(0), "insert_text": "x"},
		{"command": "delete", "path": "/memories/a.md"},
		{"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/b.md"},
	} {
		if res := h.Exec(ctx, call); res.Text != "Error: The memory store is read-only" || !res.IsError {
			t.Errorf("%v: %q", call, res.Text)
		}
	}
	if res := h.Exec(ctx, map[string]any{"command": "view", "path": "/memories"}); res.IsError {
		t.Errorf("view: %s", res.Text)
	}
}

// The three ways around the guard that an attack found: a token completed by a later edit
// (or joined by deleting what separated its halves), a token in a path, and a password
// that merely starts like a placeholder. Complete placeholder forms stay accepted.
func TestSecretGuardBypasses(t *testing.T) {
	ctx := context.Background()
	const token = "ghp_R7xK2mP9qL4vN8wT3yB6cF1hJ5sD0gA2eZ4u"
	newH := func() *handlers.Memory {
		return handlers.New(files.NewMemoryStore(), handlers.DefaultLimits(), handlers.RejectSecrets())
	}
	refusedText := "Error: The text contains what looks like a GitHub token on line 2; memory files must not store credentials. Remove it and try again."
	refusedPath := "Error: The path contains what looks like a GitHub token; memory paths must not hold credentials. Choose another name."

	h := newH()
	if res := h.Exec(ctx, map[string]any{"command": "create", "path": "/memories/a.md", "file_text": "notes\nexport GITHUB_TOKEN=" + token[:20] + "\n"}); res.IsError {
		t.Fatalf("the first half alone is not a token: %s", res.Text)
	}
	res := h.Exec(ctx, map[string]any{"command": "str_replace", "path": "/memories/a.md", "old_str": token[10:20], "new_str": token[10:]})
	if res.Text != refusedText {
		t.Errorf("token completed by str_replace:\n got %q\nwant %q", res.Text, refusedText)
	}
	res = h.Exec(ctx, map[string]any{"command": "insert", "path": "/memories/a.md", "insert_line": float64(3), "insert_text": "unrelated line"})
	if res.IsError {
		t.Errorf("an edit elsewhere must not be refused: %s", res.Text)
	}

	h = newH()
	h.Exec(ctx, map[string]any{"command": "create", "path": "/memories/b.md", "file_text": "x\n" + token[:20] + " CUT " + token[20:] + "\n"})
	if res := h.Exec(ctx, map[string]any{"command": "str_replace", "path": "/memories/b.md", "old_str": " CUT "}); res.Text != refusedText {
		t.Errorf("token joined by deleting its middle:\n got %q\nwant %q", res.Text, refusedText)
	}

	h = newH()
	for _, call := range []map[string]any{
		{"command": "create", "path": "/memories/" + token + ".md", "file_text": "x"},
		{"command": "rename", "old_path": "/memories/b.md", "new_path": "/memories/keys/" + token},
	} {
		h.Exec(ctx, map[string]any{"command": "create", "path": "/memories/b.md", "file_text": "b"})
		if res := h.Exec(ctx, call); res.Text != refusedPath || res.Code != handlers.CodeSecret {
			t.Errorf("%v:\n got %q (%s)\nwant %q", call, res.Text, res.Code, refusedPath)
		}
	}
	if view := h.Exec(ctx, map[string]any{"command": "view", "path": "/memories"}); strings.Contains(view.Text, "ghp_") {
		t.Errorf("something was written:\n%s", view.Text)
	}

	for _, pw := range []string{"$uperS3cret2024", "%41bcS3cret", "{{S3cret99", "$", "%x", "<abc"} {
		text := "DATABASE_URL=postgres://admin:" + pw + "@db/app"
		if res := newH().Exec(ctx, map[string]any{"command": "create", "path": "/memories/db.md", "file_text": text}); !res.IsError {
			t.Errorf("password %q was taken for a placeholder", pw)
		}
	}
	for _, pw := range []string{"${DB_PASSWORD}", "%DB_PASSWORD%", "<password>", "<db password>", "********", "password", "xxxx"} {
		text := "DATABASE_URL=postgres://admin:" + pw + "@db/app"
		if res := newH().Exec(ctx, map[string]any{"command": "create", "path": "/memories/db.md", "file_text": text}); res.IsError {
			t.Errorf("placeholder %q refused: %s", pw, res.Text)
		}
	}
}
