package configdir_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/xdsd/xdsd/internal/testutil/testcerts"
	"github.com/xdsd/xdsd/source/configdir"
)

// TestErrorsHideSecrets checks that the reason a file is rejected does not
// quote secret material: a value protojson refuses within a field marked
// sensitive (in a Secret, in a listener's typed_config)
// is "[redacted]", and so is a PEM private key a decoder's error quotes;
// other values are quoted as before, and so are the keys of fields.
func TestErrorsHideSecrets(t *testing.T) {
	key := string(testcerts.NewCA(t, "test CA").Issue(t, "server", true).KeyPEM)
	keyLine := strings.Split(key, "\n")[1]
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	const secret = "\"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret\nname: s\n"
	const tlsContext = `"@type": type.googleapis.com/envoy.config.listener.v3.Listener
name: l
filter_chains:
- transport_socket:
    name: tls
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
      common_tls_context: {tls_certificates: [{private_key: PRIVATE_KEY}]}
`
	for _, tc := range []struct {
		name, file, content string
		secrets             []string // not in the error
		want                string   // in the error
	}{
		{"private_key_not_base64", "a.yaml", secret + "tls_certificate: {private_key: {inline_bytes: " + q(key) + "}}\n",
			[]string{keyLine}, `sds "s": tls_certificate.private_key.inline_bytes: invalid value for bytes field inlineBytes: [redacted]`},
		{"private_key_a_string", "a.yaml", secret + "tls_certificate: {private_key: " + q(key) + "}\n",
			[]string{keyLine}, `sds "s": tls_certificate.private_key: unexpected token [redacted]`},
		{"password_not_base64", "a.json", `{"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret", "name": "s",
			"tlsCertificate": {"password": {"inlineBytes": "hunter2 hunter2"}}}`,
			[]string{"hunter2"}, `tlsCertificate.password.inlineBytes: invalid value for bytes field inlineBytes: [redacted]`},
		{"pkcs12_a_number", "a.yaml", secret + "tls_certificate: {pkcs12: {inline_string: 1234567}}\n",
			[]string{"1234567"}, `tls_certificate.pkcs12.inline_string: invalid value for string field inlineString: [redacted]`},
		{"session_ticket_key", "a.yaml", secret + "session_ticket_keys: {keys: [{inline_bytes: \"ticket key!\"}]}\n",
			[]string{"ticket key!"}, `session_ticket_keys.keys[0].inline_bytes: invalid value for bytes field inlineBytes: [redacted]`},
		{"generic_secret", "a.yaml", secret + "generic_secret: {secret: {inline_bytes: \"generic secret!\"}}\n",
			[]string{"generic secret!"}, `generic_secret.secret.inline_bytes: invalid value`},
		{"generic_secrets_map", "a.yaml", secret + "generic_secret: {secrets: {api: {inline_bytes: \"map secret!\"}}}\n",
			[]string{"map secret!"}, `generic_secret.secrets.api.inline_bytes: invalid value`},
		{"listener_tls_context", "l.yaml", strings.Replace(tlsContext, "PRIVATE_KEY", "{inline_bytes: "+q(key)+"}", 1),
			[]string{keyLine}, `lds "l": filter_chains[0].transport_socket.typed_config.common_tls_context.tls_certificates[0].private_key.inline_bytes: invalid value for bytes field inlineBytes: [redacted]`},
		{"field_name_shown", "a.yaml", secret + "tls_certificate: {private_key: {inline_string: " + q(key) + ", colour: blue}}\n",
			[]string{keyLine}, `tls_certificate.private_key: unknown field "colour"`},
		{"other_values_shown", "a.yaml", secret + "tls_certificate: {certificate_chain: {inline_bytes: \"not base64!\"}}\n",
			nil, `tls_certificate.certificate_chain.inline_bytes: invalid value for bytes field inlineBytes: "not base64!"`},
		{"pem_in_a_decoder_error", "a.yaml", q(key) + ": 1\n" + q(key) + ": 2\n", // YAML's error quotes a repeated key
			[]string{keyLine}, `line 2: mapping key "[redacted]\n" already defined at line 1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := configdir.ParseFile(tc.file, []byte(tc.content))
			if err == nil {
				t.Fatal("no error")
			}
			for _, s := range tc.secrets {
				if strings.Contains(err.Error(), s) {
					t.Errorf("the error quotes %q: %v", s, err)
				}
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want %q in it", err, tc.want)
			}
		})
	}
}
