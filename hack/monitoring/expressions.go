package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// shippedExpressions reads every PromQL expression from the checked-in dashboard JSON
// (panel targets and query variables) and PrometheusRule under root: what users get,
// not what this package meant to write.
func shippedExpressions(root string) ([]expression, error) {
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Type, Name string
				Query      any `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	data, err := os.ReadFile(filepath.Join(root, dashboardFile))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		return nil, fmt.Errorf("while reading %s: %w", dashboardFile, err)
	}
	var exprs []expression
	for _, p := range dash.Panels {
		for _, t := range p.Targets {
			exprs = append(exprs, expression{Where: "panel " + p.Title + " query " + t.RefID, Expr: t.Expr})
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(string); ok && v.Type == "query" {
			exprs = append(exprs, expression{Where: "variable " + v.Name, Expr: q})
		}
	}

	var rule struct {
		Spec struct {
			Groups []ruleGroup `json:"groups"`
		} `json:"spec"`
	}
	if data, err = os.ReadFile(filepath.Join(root, ruleFile)); err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(data, &rule); err != nil {
		return nil, fmt.Errorf("while reading %s: %w", ruleFile, err)
	}
	for _, g := range rule.Spec.Groups {
		for _, a := range g.Rules {
			exprs = append(exprs, expression{Where: "alert " + a.Alert, Expr: a.Expr})
		}
	}
	return exprs, nil
}
