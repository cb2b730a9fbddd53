package measure

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// prometheus runs the check's instant query and judges its one number with the check's CEL
// conditions. An empty vector or NaN is Inconclusive (no data: a ratio over no requests is
// 0/0); a vector of several samples, a range vector or a string is an Error naming what came
// back; a query Prometheus rejects as bad_data (it does not parse) is Fatal.
func (t *Taker) prometheus(ctx context.Context, c *routingv1alpha1.PrometheusCheck, vars map[string]string, secrets Secrets) result {
	success, err := t.conditions.compile(c.SuccessCondition)
	if err != nil {
		return fatal("successCondition %q: %v", c.SuccessCondition, err)
	}
	var failure *condition
	if c.FailureCondition != "" {
		if failure, err = t.conditions.compile(c.FailureCondition); err != nil {
			return fatal("failureCondition %q: %v", c.FailureCondition, err)
		}
	}
	u, err := url.Parse(c.Address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fatal("address %q is not an http or https URL", c.Address)
	}
	creds, err := resolve(ctx, secrets, c.Headers, c.TLS, vars)
	if err != nil {
		return errorf("%v", err)
	}
	cl, err := t.clientFor(creds)
	if err != nil {
		return fatal("%v", err)
	}
	if len(creds.headers) > 0 {
		cl = &http.Client{Transport: withHeaders{cl.Transport, creds.headers}, CheckRedirect: cl.CheckRedirect}
	}
	client, err := api.NewClient(api.Config{Address: c.Address, Client: cl})
	if err != nil {
		return fatal("address %s: %v", u.Redacted(), err)
	}
	query := expand(c.Query, vars)
	v, _, err := promv1.NewAPI(client).Query(ctx, query, t.now())
	if err != nil {
		var perr *promv1.Error
		switch {
		case errors.As(err, &perr) && perr.Type == promv1.ErrBadData:
			return fatal("Prometheus at %s rejects the query: %s", u.Redacted(), perr.Msg)
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
			return errorf("Prometheus at %s: no answer within timeoutSeconds", u.Redacted())
		}
		return errorf("Prometheus at %s: %v", u.Redacted(), unwrapURL(err))
	}
	x, r, ok := oneNumber(v)
	if !ok {
		return r
	}
	value := strconv.FormatFloat(x, 'g', 6, 64)
	if math.IsNaN(x) {
		return result{phase: routingv1alpha1.MeasurementInconclusive, value: "NaN", message: "the query returned NaN: no data in its window (a ratio over no requests is 0/0)"}
	}
	ok, err = success.eval(x)
	if err != nil {
		return errorf("successCondition %q on %s: %v", c.SuccessCondition, value, err)
	}
	if ok {
		return result{phase: routingv1alpha1.MeasurementSuccessful, value: value}
	}
	if failure == nil {
		return result{phase: routingv1alpha1.MeasurementFailed, value: value, message: fmt.Sprintf("successCondition %s is false", c.SuccessCondition)}
	}
	bad, err := failure.eval(x)
	switch {
	case err != nil:
		return errorf("failureCondition %q on %s: %v", c.FailureCondition, value, err)
	case bad:
		return result{phase: routingv1alpha1.MeasurementFailed, value: value, message: fmt.Sprintf("failureCondition %s is true", c.FailureCondition)}
	}
	return result{phase: routingv1alpha1.MeasurementInconclusive, value: value, message: "neither successCondition nor failureCondition holds"}
}

// oneNumber returns the query result's one number, or the result that says why there is not one.
func oneNumber(v model.Value) (float64, result, bool) {
	switch r := v.(type) {
	case *model.Scalar:
		if r == nil {
			break
		}
		return float64(r.Value), result{}, true
	case model.Vector:
		switch len(r) {
		case 0:
			return 0, result{phase: routingv1alpha1.MeasurementInconclusive, message: "no data: the query returned an empty vector"}, false
		case 1:
			if r[0] == nil {
				break
			}
			return float64(r[0].Value), result{}, true
		}
		return 0, errorf("the query returned %d series; a check needs one number (aggregate it, e.g. with sum() or max())", len(r)), false
	case model.Matrix:
		return 0, errorf("the query returned a range vector; a check needs one number (use an instant vector, e.g. rate(x[1m]) not x[1m])"), false
	case *model.String:
		return 0, errorf("the query returned a string; a check needs one number"), false
	}
	return 0, errorf("the query returned no value Prometheus documents (%T)", v), false
}

func (t *Taker) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}
