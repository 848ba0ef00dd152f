package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
)

const (
	// File names inside a secret volume; the Secret keys they come from are chosen by
	// the user (with these defaults) or fixed by the Secret type (tls.crt, tls.key).
	passwordFile     = "password"
	clientSecretFile = "client-secret"
	caFile           = "ca.crt"
	certFile         = corev1.TLSCertKey
	keyFile          = corev1.TLSPrivateKeyKey
)

// secretVolume is one referenced Secret, mounted read-only into the mirror pods at
// secretsDir/<name>/ with only the referenced keys, under fixed file names.
type secretVolume struct {
	name   string // the volume name and directory: source-sasl, target-ca, ...
	secret string
	field  string // the spec field that references the Secret, for messages
	items  []corev1.KeyToPath
}

func secretFilePath(volume, file string) string { return secretsDir + "/" + volume + "/" + file }

// secretVolumes lists the Secrets m references, in a fixed order (the pod template and
// the config hash depend on it).
func secretVolumes(m *v1alpha1.KafkaMirror) []secretVolume {
	var out []secretVolume
	for _, c := range []struct {
		role string
		cl   *v1alpha1.ClusterSpec
	}{{kafka.RoleSource, &m.Spec.Source}, {kafka.RoleTarget, &m.Spec.Target}} {
		if s := c.cl.SASL; s != nil && s.PasswordSecretRef != nil {
			out = append(out, secretVolume{name: c.role + "-sasl", secret: s.PasswordSecretRef.Name,
				field: "spec." + c.role + ".sasl.passwordSecretRef",
				items: []corev1.KeyToPath{{Key: keyOr(s.PasswordSecretRef.Key, passwordFile), Path: passwordFile}}})
		}
		if s := c.cl.SASL; s != nil && s.OAuth != nil {
			out = append(out, secretVolume{name: c.role + "-oauth", secret: s.OAuth.ClientSecretRef.Name,
				field: "spec." + c.role + ".sasl.oauth.clientSecretRef",
				items: []corev1.KeyToPath{{Key: keyOr(s.OAuth.ClientSecretRef.Key, clientSecretFile), Path: clientSecretFile}}})
		}
		if t := c.cl.TLS; t != nil && t.CASecretRef != nil {
			out = append(out, secretVolume{name: c.role + "-ca", secret: t.CASecretRef.Name,
				field: "spec." + c.role + ".tls.caSecretRef",
				items: []corev1.KeyToPath{{Key: keyOr(t.CASecretRef.Key, caFile), Path: caFile}}})
		}
		if t := c.cl.TLS; t != nil {
			for i, ref := range t.CASecretRefs {
				out = append(out, secretVolume{name: extraCAVolume(c.role, i), secret: ref.Name,
					field: fmt.Sprintf("spec.%s.tls.caSecretRefs[%d]", c.role, i),
					items: []corev1.KeyToPath{{Key: keyOr(ref.Key, caFile), Path: caFile}}})
			}
		}
		if t := c.cl.TLS; t != nil && t.CertSecretRef != nil {
			ref := t.CertSecretRef
			out = append(out, secretVolume{name: c.role + "-cert", secret: ref.Name,
				field: "spec." + c.role + ".tls.certSecretRef",
				items: []corev1.KeyToPath{{Key: keyOr(ref.CertKey, certFile), Path: certFile}, {Key: keyOr(ref.KeyKey, keyFile), Path: keyFile}}})
		}
	}
	return out
}

// extraCAVolume names the volume of spec.<role>.tls.caSecretRefs[i].
func extraCAVolume(role string, i int) string { return fmt.Sprintf("%s-ca-%d", role, i+1) }

func keyOr(key, def string) string {
	if key == "" {
		return def
	}
	return key
}

// secretNames returns the names of the Secrets m references, sorted and unique: what
// secretPoller reads.
func secretNames(m *v1alpha1.KafkaMirror) []string {
	seen := map[string]bool{}
	var names []string
	for _, v := range secretVolumes(m) {
		if !seen[v.secret] {
			seen[v.secret] = true
			names = append(names, v.secret)
		}
	}
	sort.Strings(names)
	return names
}

// secretFiles holds the referenced Secret keys by the path the mirror pods see them at.
// The operator's own Kafka clients read them through kafka.WithFileReader, so the
// operator and the pods use the same files. It never leaves the process: only its hash
// is written anywhere.
type secretFiles map[string][]byte

// read serves a path like os.ReadFile would.
func (f secretFiles) read(path string) ([]byte, error) {
	b, ok := f[path]
	if !ok {
		return nil, fmt.Errorf("while reading %s: %w", path, fs.ErrNotExist)
	}
	return b, nil
}

// hash digests the files' paths and contents, so the pod template changes exactly when a
// referenced Secret key changes.
func (f secretFiles) hash() string {
	paths := make([]string, 0, len(f))
	for p := range f {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	h := sha256.New()
	for _, p := range paths {
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(f[p]))
		h.Write(f[p])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// missingSecretError says a referenced Secret or key does not exist (yet). It is not a
// spec error: the user may create the Secret after the KafkaMirror (secretPoller notices).
type missingSecretError struct{ msg string }

func (e *missingSecretError) Error() string { return e.msg }

// secretReaderRole is the ClusterRole of config/rbac/role.yaml that grants `get` on
// Secrets (the +kubebuilder:rbac marker's roleName), named in the fix a message offers.
const secretReaderRole = "kafka-mirror-secret-reader"

// forbiddenSecretError says RBAC does not let the operator get a referenced Secret in the
// KafkaMirror's namespace (the API server answered 403). Only an administrator can fix
// it, by granting the Secret reader there; secretPoller notices the grant (the Secret's
// state goes from forbidden to a version), so it is not retried with backoff. It names
// the field, the Secret and the namespace, never anything read from the Secret, and not
// the API server's message (which names the operator's service account).
type forbiddenSecretError struct {
	field, secret, namespace string
}

func (e *forbiddenSecretError) Error() string {
	return fmt.Sprintf("the operator may not read Secret %q in namespace %q (used by %s): add namespace %q to the chart value rbac.secretNamespaces "+
		"(kustomize: a RoleBinding there to the ClusterRole %s)", e.secret, e.namespace, e.field, e.namespace, secretReaderRole)
}

// readSecretFiles reads the referenced Secret keys through r, an uncached reader, by
// name (RBAC `get` only): the operator neither lists nor watches Secrets and holds no
// Secret data between reconciles.
func readSecretFiles(ctx context.Context, r client.Reader, m *v1alpha1.KafkaMirror) (secretFiles, error) {
	files := secretFiles{}
	secrets := map[string]*corev1.Secret{}
	for _, v := range secretVolumes(m) {
		s, ok := secrets[v.secret]
		if !ok {
			s = &corev1.Secret{}
			if err := r.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: v.secret}, s); err != nil {
				switch {
				case apierrors.IsNotFound(err):
					return nil, &missingSecretError{fmt.Sprintf("Secret %q (used by %s) does not exist", v.secret, v.field)}
				case apierrors.IsForbidden(err):
					return nil, &forbiddenSecretError{field: v.field, secret: v.secret, namespace: m.Namespace}
				}
				return nil, fmt.Errorf("while reading Secret %q: %w", v.secret, err)
			}
			secrets[v.secret] = s
		}
		for _, it := range v.items {
			b, ok := s.Data[it.Key]
			if !ok {
				return nil, &missingSecretError{fmt.Sprintf("Secret %q has no key %q (used by %s)", v.secret, it.Key, v.field)}
			}
			files[secretFilePath(v.name, it.Path)] = b
		}
	}
	return files, nil
}
