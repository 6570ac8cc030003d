package xdsctl

import (
	"bytes"
	"testing"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestPrinterYAMLRoundTrips checks that the YAML of an event reads back
// as the same values: strings that look like numbers or booleans (proto3
// JSON's 64-bit integers, versions) stay strings.
func TestPrinterYAMLRoundTrips(t *testing.T) {
	var buf bytes.Buffer
	p := &printer{w: &buf, format: formatYAML}
	e := event{Event: eventUpdate, Type: "x", TypeURL: "type.googleapis.com/google.protobuf.UInt64Value", Name: "true", Version: "123",
		Resource: wrapperspb.UInt64(18446744073709551615)}
	if err := p.print(e); err != nil {
		t.Fatal(err)
	}
	if err := p.print(event{Event: eventDoesNotExist, Type: "x", TypeURL: "u", Name: "n"}); err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(&buf)
	var first, second map[string]any
	if err := dec.Decode(&first); err != nil {
		t.Fatal(err)
	}
	if err := dec.Decode(&second); err != nil {
		t.Fatal(err)
	}
	if first["name"] != "true" || first["version"] != "123" || first["resource"] != "18446744073709551615" {
		t.Errorf("first event read back as %#v from:\n%s", first, buf.String())
	}
	if second["event"] != "does_not_exist" || second["name"] != "n" {
		t.Errorf("second event read back as %#v", second)
	}
}
