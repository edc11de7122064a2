package v1beta1

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/katalog-dev/katalog/benches/peers/api/v1"
)

func hub(policy v1.ConcurrencyPolicy, timeout *int64) *v1.CronTab {
	return &v1.CronTab{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Annotations: map[string]string{"keep": "me"}},
		Spec: v1.CronTabSpec{
			Schedule: "* * * * *", Image: "busybox", TimeoutSeconds: timeout, ConcurrencyPolicy: policy,
		},
	}
}

// The annotation is the one katalog writes for katalogs/crontab.yaml,
// byte for byte, and the way back restores the hub exactly.
func TestStashRoundTrip(t *testing.T) {
	timeout := int64(600)
	for _, c := range []struct {
		hub   *v1.CronTab
		stash string
	}{
		{hub("Forbid", &timeout), `{"v1":{"spec.timeoutSeconds":600,"spec.concurrencyPolicy":"Forbid"}}`},
		{hub("Allow", &timeout), `{"v1":{"spec.timeoutSeconds":600}}`},
		{hub("", nil), `{"v1":{"!absent":["spec.concurrencyPolicy"]}}`},
		{hub("Allow", nil), ``},
	} {
		spoke := &CronTab{}
		if err := spoke.ConvertFrom(c.hub); err != nil {
			t.Fatal(err)
		}
		if got := spoke.Annotations["katalog.dev/stash"]; got != c.stash {
			t.Errorf("stash %q, want %q", got, c.stash)
		}
		if spoke.Spec.CronSpec != "* * * * *" || c.hub.Annotations["katalog.dev/stash"] != "" {
			t.Errorf("wrong spoke %+v, or the hub changed", spoke)
		}
		back := &v1.CronTab{}
		if err := spoke.ConvertTo(back); err != nil {
			t.Fatal(err)
		}
		if back.Spec.ConcurrencyPolicy != c.hub.Spec.ConcurrencyPolicy ||
			(back.Spec.TimeoutSeconds == nil) != (c.hub.Spec.TimeoutSeconds == nil) ||
			len(back.Annotations) != 1 || back.Annotations["keep"] != "me" {
			t.Errorf("round trip: %+v %+v, want %+v", back.Spec, back.Annotations, c.hub.Spec)
		}
	}
}

// Sections of other versions travel untouched, in their place.
func TestOtherSectionsStay(t *testing.T) {
	h := hub("Replace", nil)
	h.Annotations["katalog.dev/stash"] = `{"v2":{"spec.x":[1, 2]},"v1":{"spec.y":true}}`
	spoke := &CronTab{}
	if err := spoke.ConvertFrom(h); err != nil {
		t.Fatal(err)
	}
	want := `{"v2":{"spec.x":[1,2]},"v1":{"spec.y":true,"spec.concurrencyPolicy":"Replace"}}`
	if got := spoke.Annotations["katalog.dev/stash"]; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	h.Annotations["katalog.dev/stash"] = `not json`
	if err := spoke.ConvertFrom(h); err == nil {
		t.Error("a malformed stash converted")
	}
}
