package handlers

import (
	"regexp"
	"strings"
	"sync"
)

// A secretRule recognises one kind of credential. Keywords are cheap substring checks that
// must all be absent for the (linear-time, RE2) expression to be skipped, so that ordinary
// text costs a few substring searches, not a dozen regular expression passes.
type secretRule struct {
	kind     string
	keywords []string
	pattern  string
	// allow, when set, accepts a match that is a known placeholder or documentation example.
	allow func(match string) bool
}

// secretRules is memory-mcp's credential rule set. Kinds are worded to follow "looks like a". It follows the formats that the
// providers document and that gitleaks' rules describe (read, not copied); see the README
// for why it is not gitleaks itself.
var secretRuleTable = []secretRule{
	{kind: "private key", keywords: []string{"PRIVATE KEY"},
		pattern: `-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK)?-----`},
	{kind: "Amazon Web Services access key", keywords: []string{"AKIA", "ASIA", "ABIA", "ACCA"},
		pattern: `\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}\b`,
		allow:   func(m string) bool { return strings.HasSuffix(m, "EXAMPLE") }},
	{kind: "Amazon Web Services secret access key", keywords: []string{"aws", "AWS", "Aws"},
		pattern: `(?i)aws.{0,20}?(?:secret|private).{0,20}?[=:"'\s]\s*["']?[A-Za-z0-9/+]{40}\b`,
		allow: func(m string) bool {
			return strings.Contains(m, "EXAMPLEKEY")
		}},
	{kind: "GitHub token", keywords: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"},
		pattern: `\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{70,100})\b`},
	{kind: "GitLab token", keywords: []string{"glpat-"},
		pattern: `\bglpat-[A-Za-z0-9_-]{20,}`},
	{kind: "key for the Anthropic API", keywords: []string{"sk-ant-"},
		pattern: `\bsk-ant-[a-z]+[0-9]{2}-[A-Za-z0-9_-]{32,}`},
	{kind: "key for the OpenAI API", keywords: []string{"sk-"},
		pattern: `\bsk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,}|[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20})`},
	{kind: "Google API key", keywords: []string{"AIza"},
		pattern: `\bAIza[0-9A-Za-z_-]{35}\b`},
	{kind: "Slack token", keywords: []string{"xox"},
		pattern: `\bxox[abposr]-[0-9A-Za-z]{6,}-[0-9A-Za-z-]{6,}`},
	{kind: "Slack webhook URL", keywords: []string{"hooks.slack.com"},
		pattern: `https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9+/_-]{20,}`},
	{kind: "Stripe secret key", keywords: []string{"sk_live_", "rk_live_", "sk_test_", "rk_test_"},
		pattern: `\b[rs]k_(?:live|test)_[0-9A-Za-z]{20,}\b`},
	{kind: "SendGrid API key", keywords: []string{"SG."},
		pattern: `\bSG\.[A-Za-z0-9_-]{20,24}\.[A-Za-z0-9_-]{40,50}\b`},
	{kind: "token for the npm registry", keywords: []string{"npm_"},
		pattern: `\bnpm_[A-Za-z0-9]{36}\b`},
	{kind: "PyPI token", keywords: []string{"pypi-"},
		pattern: `\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}`},
	{kind: "Hugging Face token", keywords: []string{"hf_"},
		pattern: `\bhf_[A-Za-z]{34}\b`},
	{kind: "DigitalOcean token", keywords: []string{"dop_v1_", "doo_v1_", "dor_v1_"},
		pattern: `\bdo[opr]_v1_[a-f0-9]{64}\b`},
	{kind: "storage account key for Azure", keywords: []string{"AccountKey="},
		pattern: `AccountKey=[A-Za-z0-9+/]{80,}={0,2}`},
	{kind: "JSON Web Token", keywords: []string{"eyJ"},
		pattern: `\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}`},
	{kind: "password in a connection string", keywords: []string{"://"},
		pattern: `\b[A-Za-z][A-Za-z0-9+.-]{1,30}://[^\s:/@'"]{1,128}:([^\s@/'"]{1,256})@[^\s/'"]+`,
		allow:   placeholderPassword},
}

// compiledRule is a rule with its expression compiled.
type compiledRule struct {
	secretRule
	re *regexp.Regexp
}

// secretRules compiles the table on first use: a server that is never asked to write pays
// nothing for it at start-up (about a millisecond otherwise).
var secretRules = sync.OnceValue(func() []compiledRule {
	rules := make([]compiledRule, len(secretRuleTable))
	for i, r := range secretRuleTable {
		rules[i] = compiledRule{r, regexp.MustCompile(r.pattern)}
	}
	return rules
})

var userinfo = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`://[^\s:/@'"]{1,128}:([^\s@/'"]{1,256})@`)
})

// placeholderPassword accepts connection strings whose password is a placeholder: a variable
// reference, an angle-bracket or starred stand-in, or a word that means "password here".
func placeholderPassword(m string) bool {
	sub := userinfo().FindStringSubmatch(m)
	if sub == nil {
		return true
	}
	pw := sub[1]
	switch {
	case strings.HasPrefix(pw, "$"), strings.HasPrefix(pw, "%"), strings.HasPrefix(pw, "{{"),
		strings.HasPrefix(pw, "<") && strings.HasSuffix(pw, ">"),
		strings.Trim(pw, "*xX.") == "":
		return true
	}
	switch strings.ToLower(pw) {
	case "password", "pass", "passwd", "pwd", "secret", "your_password", "yourpassword", "mypassword", "changeme":
		return true
	}
	return false
}

// findSecret reports the first credential in text: its kind and the 1-based line of the
// text it starts on.
func findSecret(text string) (kind string, line int, found bool) {
	at := -1
	for _, r := range secretRules() {
		hit := false
		for _, k := range r.keywords {
			if strings.Contains(text, k) {
				hit = true
				break
			}
		}
		if !hit {
			continue
		}
		for _, loc := range r.re.FindAllStringIndex(text, -1) {
			if r.allow != nil && r.allow(text[loc[0]:loc[1]]) {
				continue
			}
			if at < 0 || loc[0] < at {
				at, kind = loc[0], r.kind
			}
			break
		}
	}
	if at < 0 {
		return "", 0, false
	}
	return kind, strings.Count(text[:at], "\n") + 1, true
}
