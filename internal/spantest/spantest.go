// Package spantest reads recorded OpenTelemetry spans for the privacy
// tests of tracing and asynqtrace, which check that no span carries a
// rendered lock key or a value it was rendered from.
package spantest

import (
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Texts returns every text s shows an exporter: its name, its status
// description, each attribute as key=value, and each event's name and
// attributes.
func Texts(s sdktrace.ReadOnlySpan) []string {
	texts := []string{s.Name(), s.Status().Description}
	for _, a := range s.Attributes() {
		texts = append(texts, string(a.Key)+"="+a.Value.String())
	}
	for _, e := range s.Events() {
		texts = append(texts, e.Name)
		for _, a := range e.Attributes {
			texts = append(texts, string(a.Key)+"="+a.Value.String())
		}
	}
	return texts
}
