package redact_test

import (
	"strings"
	"testing"

	xdstypev3 "github.com/cncf/xds/go/xds/type/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	apikeyauthv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/api_key_auth/v3"
	basicauthv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/basic_auth/v3"
	oauth2v3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/oauth2/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xdsd/xdsd/internal/testutil/testcerts"
	"github.com/xdsd/xdsd/resource/redact"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func inline(s string) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: s}}
}

func inlineBytes(b string) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: []byte(b)}}
}

func file(name string) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: name}}
}

func mustAny(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// check redacts in, and checks that the result, as the config dump
// writes it, holds none of secrets, all of kept and want "[redacted]"s,
// and that in is as it was.
func check(t *testing.T, in proto.Message, secrets, kept []string, want int) proto.Message {
	t.Helper()
	before := proto.Clone(in)
	out := redact.Message(in)
	if d := cmp.Diff(before, in, protocmp.Transform()); d != "" {
		t.Errorf("the message given was modified (-before +after):\n%s", d)
	}
	js, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(out)
	if err != nil {
		t.Fatalf("the redacted message does not encode: %v", err)
	}
	s := string(js)
	for _, secret := range secrets {
		if strings.Contains(s, secret) {
			t.Errorf("secret %q shown:\n%s", secret, s)
		}
	}
	for _, k := range kept {
		if !strings.Contains(s, k) {
			t.Errorf("%q is not secret and was lost:\n%s", k, s)
		}
	}
	if n := strings.Count(s, redact.Redacted); n != want {
		t.Errorf("%d %q, want %d:\n%s", n, redact.Redacted, want, s)
	}
	if want == 0 && out != in {
		t.Error("a message without secrets was copied")
	}
	if want > 0 && out == in {
		t.Error("the message given was returned redacted")
	}
	return out
}

func TestMessage(t *testing.T) {
	ca := testcerts.NewCA(t, "test CA")
	cert := ca.Issue(t, "server", true)
	keyPEM, certPEM := string(cert.KeyPEM), string(cert.CertPEM)
	keyBody := strings.Split(keyPEM, "\n")[1] // a line of base64 of the key

	t.Run("TLS_certificate", func(t *testing.T) {
		s := &tlsv3.Secret{Name: "server-cert", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: inline(certPEM),
			PrivateKey:       inline(keyPEM),
			Password:         inlineBytes("hunter2"),
			Pkcs12:           inlineBytes("PKCS12-BUNDLE"),
			OcspStaple:       file("/etc/ocsp.der"),
		}}}
		out := check(t, s, []string{keyBody, "hunter2", "aHVudGVyMg" /* hunter2 in base64 */, "UEtDUzEy" /* PKCS12 */},
			[]string{"server-cert", "BEGIN CERTIFICATE", "/etc/ocsp.der"}, 3)
		tc := out.(*tlsv3.Secret).GetTlsCertificate()
		for what, ds := range map[string]*corev3.DataSource{"private_key": tc.PrivateKey, "password": tc.Password, "pkcs12": tc.Pkcs12} {
			if ds.GetInlineString() != redact.Redacted || ds.GetInlineBytes() != nil {
				t.Errorf("%s = %v, want inline_string %q", what, ds, redact.Redacted)
			}
		}
	})

	t.Run("references_are_not_secret", func(t *testing.T) {
		s := &tlsv3.Secret{Name: "by-file", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: file("/certs/tls.crt"),
			PrivateKey:       file("/certs/tls.key"),
			Password:         &corev3.DataSource{Specifier: &corev3.DataSource_EnvironmentVariable{EnvironmentVariable: "KEY_PASSWORD"}},
		}}}
		check(t, s, nil, []string{"/certs/tls.key", "KEY_PASSWORD"}, 0)
	})

	t.Run("session_ticket_keys", func(t *testing.T) {
		s := &tlsv3.Secret{Name: "stek", Type: &tlsv3.Secret_SessionTicketKeys{SessionTicketKeys: &tlsv3.TlsSessionTicketKeys{
			Keys: []*corev3.DataSource{inlineBytes(strings.Repeat("K", 80)), file("/keys/stek.2"), inline("ticket-key-3")},
		}}}
		check(t, s, []string{"S0tLS0tL" /* K... in base64 */, "ticket-key-3"}, []string{"/keys/stek.2"}, 2)
	})

	t.Run("generic_secret", func(t *testing.T) {
		s := &tlsv3.Secret{Name: "hmac", Type: &tlsv3.Secret_GenericSecret{GenericSecret: &tlsv3.GenericSecret{
			Secret: inline("the-hmac-secret"),
		}}}
		check(t, s, []string{"the-hmac-secret"}, []string{"hmac"}, 1)
	})

	t.Run("generic_secrets_map", func(t *testing.T) {
		s := &tlsv3.Secret{Name: "creds", Type: &tlsv3.Secret_GenericSecret{GenericSecret: &tlsv3.GenericSecret{
			Secrets: map[string]*corev3.DataSource{
				"client-secret": inline("oauth-client-secret"),
				"api-token":     inlineBytes("api-token-value"),
				"from-env":      {Specifier: &corev3.DataSource_EnvironmentVariable{EnvironmentVariable: "TOKEN_VAR"}},
			},
		}}}
		check(t, s, []string{"oauth-client-secret", "api-token-value", "YXBpLXRva2VuLXZhbHVl"},
			[]string{"client-secret", "api-token", "from-env", "TOKEN_VAR"}, 2)
	})

	t.Run("validation_context_is_not_secret", func(t *testing.T) {
		s := &tlsv3.Secret{Name: "ca", Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			TrustedCa: inline(string(ca.CertPEM)),
		}}}
		check(t, s, nil, []string{"BEGIN CERTIFICATE"}, 0)
	})

	t.Run("listener_transport_socket", func(t *testing.T) {
		tlsCtx := &tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsCertificates: []*tlsv3.TlsCertificate{{CertificateChain: inline(certPEM), PrivateKey: inline(keyPEM)}},
			AlpnProtocols:   []string{"h2"},
		}}
		l := &listenerv3.Listener{Name: "https", FilterChains: []*listenerv3.FilterChain{{
			TransportSocket: &corev3.TransportSocket{Name: "envoy.transport_sockets.tls",
				ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(t, tlsCtx)}},
		}}}
		out := check(t, l, []string{keyBody}, []string{"https", "BEGIN CERTIFICATE", "h2", "DownstreamTlsContext"}, 1)
		var got tlsv3.DownstreamTlsContext
		if err := out.(*listenerv3.Listener).FilterChains[0].TransportSocket.GetTypedConfig().UnmarshalTo(&got); err != nil {
			t.Fatal(err)
		}
		if pk := got.CommonTlsContext.TlsCertificates[0].PrivateKey; pk.GetInlineString() != redact.Redacted {
			t.Errorf("private key packed in typed_config: %v", pk)
		}
	})

	// OAuth2's token and HMAC secrets are references to SDS secrets (the
	// secrets themselves are redacted as generic secrets): its config
	// holds nothing to hide.
	t.Run("oauth2_filter", func(t *testing.T) {
		oauth := &oauth2v3.OAuth2{Config: &oauth2v3.OAuth2Config{
			AuthorizationEndpoint: "https://idp.example/authorize",
			Credentials: &oauth2v3.OAuth2Credentials{
				ClientId:    "client-1",
				TokenSecret: &tlsv3.SdsSecretConfig{Name: "token-secret"},
				TokenFormation: &oauth2v3.OAuth2Credentials_HmacSecret{
					HmacSecret: &tlsv3.SdsSecretConfig{Name: "hmac-secret"}},
			},
		}}
		l := listenerWithFilters(t, &hcmv3.HttpFilter{Name: "envoy.filters.http.oauth2",
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, oauth)}})
		check(t, l, nil, []string{"token-secret", "hmac-secret", "client-1"}, 0)
	})

	t.Run("filter_credentials_inline", func(t *testing.T) {
		ba := &basicauthv3.BasicAuth{Users: inline("admin:{SHA}secret-hash")}
		l := listenerWithFilters(t, &hcmv3.HttpFilter{Name: "envoy.filters.http.basic_auth",
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, ba)}})
		check(t, l, []string{"secret-hash"}, []string{"basic_auth"}, 1)
	})

	t.Run("sensitive_strings", func(t *testing.T) {
		keys := &apikeyauthv3.ApiKeyAuth{
			Credentials: []*apikeyauthv3.Credential{{Key: "api-key-1", Client: "client-a"}, {Key: "api-key-2", Client: "client-b"}},
			KeySources:  []*apikeyauthv3.KeySource{{Header: "x-api-key"}},
		}
		l := listenerWithFilters(t, &hcmv3.HttpFilter{Name: "envoy.filters.http.api_key_auth",
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, keys)}})
		check(t, l, []string{"api-key-1", "api-key-2", "client-a"}, []string{"x-api-key"}, 4)
	})

	t.Run("typed_struct", func(t *testing.T) {
		users, err := structpb.NewStruct(map[string]any{"users": map[string]any{"inline_string": "admin:{SHA}struct-hash"}})
		if err != nil {
			t.Fatal(err)
		}
		ts := &xdstypev3.TypedStruct{TypeUrl: "type.googleapis.com/envoy.extensions.filters.http.basic_auth.v3.BasicAuth", Value: users}
		l := listenerWithFilters(t, &hcmv3.HttpFilter{Name: "envoy.filters.http.basic_auth",
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, ts)}})
		check(t, l, []string{"struct-hash"}, []string{"TypedStruct", "BasicAuth"}, 1)
	})

	// What a sensitive field holds is secret whatever its type: the
	// strings, numbers and booleans of a private key provider's config.
	t.Run("sensitive_message", func(t *testing.T) {
		cfg, err := structpb.NewStruct(map[string]any{"pin": "1234-5678", "slot": 7, "nested": map[string]any{"token": "hsm-token"}})
		if err != nil {
			t.Fatal(err)
		}
		s := &tlsv3.Secret{Name: "hsm", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain:   inline(certPEM),
			PrivateKeyProvider: &tlsv3.PrivateKeyProvider{ProviderName: "pkcs11", ConfigType: &tlsv3.PrivateKeyProvider_TypedConfig{TypedConfig: mustAny(t, cfg)}},
		}}}
		check(t, s, []string{"1234-5678", "hsm-token"}, []string{"pkcs11", "pin", "slot", "nested"}, 3)
	})

	t.Run("sensitive_any_of_unknown_type", func(t *testing.T) {
		s := &tlsv3.Secret{Name: "hsm", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			PrivateKeyProvider: &tlsv3.PrivateKeyProvider{ProviderName: "vendor", ConfigType: &tlsv3.PrivateKeyProvider_TypedConfig{
				TypedConfig: &anypb.Any{TypeUrl: "type.googleapis.com/vendor.NotKnown", Value: []byte("vendor-secret")}}},
		}}}
		out := redact.Message(s).(*tlsv3.Secret)
		if v := out.GetTlsCertificate().GetPrivateKeyProvider().GetTypedConfig().GetValue(); len(v) != 0 {
			t.Errorf("the value of a sensitive Any of unknown type is kept: %q", v)
		}
		if string(s.GetTlsCertificate().GetPrivateKeyProvider().GetTypedConfig().GetValue()) != "vendor-secret" {
			t.Error("the message given was modified")
		}
	})

	t.Run("no_secrets", func(t *testing.T) {
		l := listenerWithFilters(t)
		check(t, l, nil, []string{"envoy.filters.http.router"}, 0)
		if redact.Message(nil) != nil {
			t.Error("nil is not nil redacted")
		}
	})
}

// listenerWithFilters returns a listener whose HTTP connection manager
// runs filters, then the router.
func listenerWithFilters(t *testing.T, filters ...*hcmv3.HttpFilter) *listenerv3.Listener {
	t.Helper()
	filters = append(filters, &hcmv3.HttpFilter{Name: "envoy.filters.http.router",
		ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &routerv3.Router{})}})
	hcm := &hcmv3.HttpConnectionManager{StatPrefix: "ingress", HttpFilters: filters}
	return &listenerv3.Listener{Name: "http", FilterChains: []*listenerv3.FilterChain{{
		Filters: []*listenerv3.Filter{{Name: "envoy.filters.network.http_connection_manager",
			ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, hcm)}}},
	}}}
}

func TestSensitive(t *testing.T) {
	fields := (&tlsv3.TlsCertificate{}).ProtoReflect().Descriptor().Fields()
	for name, want := range map[protoreflect.Name]bool{"private_key": true, "password": true, "pkcs12": true, "certificate_chain": false, "ocsp_staple": false} {
		if got := redact.Sensitive(fields.ByName(name)); got != want {
			t.Errorf("Sensitive(TlsCertificate.%s) = %v, want %v", name, got, want)
		}
	}
}

func TestText(t *testing.T) {
	ca := testcerts.NewCA(t, "test CA")
	key := string(ca.Issue(t, "server", true).KeyPEM)
	body := strings.Split(key, "\n")[1]
	escaped := strings.ReplaceAll(key, "\n", `\n`) // as a JSON string or a text proto quotes it
	for what, tc := range map[string]struct{ in, want string }{
		"plain":      {"bad key: " + key + "after", "bad key: [redacted]\nafter"},
		"escaped":    {`private_key { inline_string: "` + escaped + `" }`, `private_key { inline_string: "[redacted]\n" }`},
		"cut_short":  {"key: " + key[:len(key)/2], "key: [redacted]"},
		"two":        {key + " and " + strings.ReplaceAll(key, "PRIVATE KEY", "RSA PRIVATE KEY"), "[redacted]\n and [redacted]\n"},
		"no_key":     {"no key here: -----BEGIN CERTIFICATE-----", "no key here: -----BEGIN CERTIFICATE-----"},
		"empty":      {"", ""},
		"only_begin": {"-----BEGIN PRIVATE KEY-----", "[redacted]"},
	} {
		got := redact.Text(tc.in)
		if strings.Contains(got, body) || got != tc.want {
			t.Errorf("%s: Text(%q) = %q, want %q", what, tc.in, got, tc.want)
		}
	}
}
