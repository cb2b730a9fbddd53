package measure

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"k8s.io/client-go/util/jsonpath"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// http sends the check's GET and judges the answer: Successful when the status code is expected
// (default 200) and the JSON condition, if any, holds; Failed otherwise; Error when no answer
// came (refused, reset, timeout).
func (t *Taker) http(ctx context.Context, c *routingv1alpha1.HTTPCheck, vars map[string]string, secrets Secrets) result {
	raw := expand(c.URL, vars)
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fatal("url %q is not an http or https URL", raw)
	}
	var jp *jsonpath.JSONPath
	if c.JSON != nil {
		jp = newJSONPath()
		if err := jp.Parse(c.JSON.Path); err != nil {
			return fatal("json.path %q does not parse: %v", c.JSON.Path, err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fatal("request to %s: %v", u.Redacted(), err)
	}
	creds, err := resolve(ctx, secrets, c.Headers, c.TLS, vars)
	if err != nil {
		return errorf("%v", err)
	}
	for _, h := range creds.headers {
		if strings.EqualFold(h.name, "Host") {
			req.Host = h.value
			continue
		}
		req.Header.Set(h.name, h.value)
	}
	cl, err := t.clientFor(creds)
	if err != nil {
		return fatal("%v", err)
	}
	resp, err := cl.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return errorf("GET %s: no answer within timeoutSeconds", u.Redacted())
		}
		return errorf("GET %s: %v", u.Redacted(), unwrapURL(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	tooLarge := errors.Is(err, errBodyTooLarge)
	if err != nil && !tooLarge {
		return errorf("GET %s: reading the body: %v", u.Redacted(), unwrapURL(err))
	}
	code := strconv.Itoa(resp.StatusCode)
	want := c.ExpectedStatus
	if len(want) == 0 {
		want = []int32{http.StatusOK}
	}
	if !slices.Contains(want, int32(resp.StatusCode)) {
		return result{phase: routingv1alpha1.MeasurementFailed, value: code, message: fmt.Sprintf("status %d, expected one of %v", resp.StatusCode, want)}
	}
	if jp == nil {
		return result{phase: routingv1alpha1.MeasurementSuccessful, value: code}
	}
	if tooLarge {
		return result{phase: routingv1alpha1.MeasurementFailed, value: code, message: fmt.Sprintf("json.path %s: %v", c.JSON.Path, errBodyTooLarge)}
	}
	got, err := jsonField(jp, body)
	if err != nil {
		return result{phase: routingv1alpha1.MeasurementFailed, value: code, message: fmt.Sprintf("json.path %s: %v", c.JSON.Path, err)}
	}
	if got != c.JSON.Equals {
		return result{phase: routingv1alpha1.MeasurementFailed, value: code, message: fmt.Sprintf("json.path %s is %q, expected %q", c.JSON.Path, got, c.JSON.Equals)}
	}
	return result{phase: routingv1alpha1.MeasurementSuccessful, value: code}
}

// jsonField evaluates jp on a JSON body; it must name exactly one value, printed as kubectl's
// -o jsonpath prints it.
func jsonField(jp *jsonpath.JSONPath, body []byte) (string, error) {
	var doc any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return "", fmt.Errorf("the body is not JSON: %v", err)
	}
	values, err := jp.FindResults(doc)
	if err != nil {
		return "", err
	}
	var n int
	for _, v := range values {
		n += len(v)
	}
	if n != 1 {
		return "", fmt.Errorf("names %d values, not one", n)
	}
	var out bytes.Buffer
	if err := jp.PrintResults(&out, values[0]); err != nil {
		return "", err
	}
	return out.String(), nil
}

// unwrapURL drops net/url's "Get \"…\": " prefix, which repeats the URL already in the message.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func newJSONPath() *jsonpath.JSONPath { return jsonpath.New("json").AllowMissingKeys(false) }
