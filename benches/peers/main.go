// crontab-peer is the webhook a controller-runtime user would write instead
// of a Katalog: the CronTab conversion webhook of katalogs/crontab.yaml
// (hub v1, spokes v1beta1 and v2 with ConvertTo/ConvertFrom) and a
// validating webhook for Pods with eight Pod Security baseline controls
// (benches/peers/pod-security-subset.yaml). scripts/peer-bench runs it next
// to `katalog serve` with the same requests.
//
//	crontab-peer --port 9443 --cert-dir DIR [--cert-name tls.crt] [--key-name tls.key]
//
// It serves TLS on 127.0.0.1 only: POST /convert, POST /validate, GET /readyz.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	v1 "github.com/katalog-dev/katalog/benches/peers/api/v1"
	"github.com/katalog-dev/katalog/benches/peers/api/v1beta1"
	v2 "github.com/katalog-dev/katalog/benches/peers/api/v2"
	"github.com/katalog-dev/katalog/benches/peers/podsecurity"
)

func main() {
	port := flag.Int("port", 9443, "port to listen on, on 127.0.0.1")
	certDir := flag.String("cert-dir", "", "directory holding the serving certificate and key")
	certName := flag.String("cert-name", "tls.crt", "certificate file in --cert-dir (PEM)")
	keyName := flag.String("key-name", "tls.key", "key file in --cert-dir (PEM)")
	flag.Parse()
	if *certDir == "" {
		fmt.Fprintln(os.Stderr, "crontab-peer: --cert-dir is required")
		os.Exit(2)
	}
	logf.SetLogger(zap.New())
	log := logf.Log.WithName("crontab-peer")

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		v1.AddToScheme, v1beta1.AddToScheme, v2.AddToScheme, corev1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			log.Error(err, "failed to build the scheme")
			os.Exit(1)
		}
	}
	if ok, err := conversion.IsConvertible(scheme, &v1.CronTab{}); !ok {
		log.Error(err, "CronTab is not convertible")
		os.Exit(1)
	}

	server := webhook.NewServer(webhook.Options{
		Host:     "127.0.0.1",
		Port:     *port,
		CertDir:  *certDir,
		CertName: *certName,
		KeyName:  *keyName,
	})
	server.Register("/convert", conversion.NewWebhookHandler(scheme, conversion.NewRegistry()))
	server.Register("/validate", admission.WithValidator[*corev1.Pod](scheme, podsecurity.Baseline{}))
	server.Register("/readyz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log.Info("serving", "address", fmt.Sprintf("127.0.0.1:%d", *port))
	if err := server.Start(ctx); err != nil {
		log.Error(err, "the webhook server stopped")
		os.Exit(1)
	}
}
