package fileout

import (
	"encoding/json"
	"testing"
)

// FuzzYAMLToJSON: any bytes either fail to convert or convert to valid
// JSON, without a crash, whatever their anchors and aliases.
func FuzzYAMLToJSON(f *testing.F) {
	for _, seed := range []string{
		"version_info: \"1\"\nresources: []\n",
		"a: &x [1, 2]\nb: *x\n",
		"a: &x [*x]\n",
		"a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n",
		"{a: 1, a: 2}",
		"- .inf\n- -.inf\n- .nan\n- 0x1F\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := yamlToJSON(data)
		if err != nil {
			return
		}
		if !json.Valid(j) {
			t.Fatalf("yamlToJSON(%q) = %q, not JSON", data, j)
		}
	})
}
