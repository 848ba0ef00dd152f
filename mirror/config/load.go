package config

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// Parse reads a config from YAML (or JSON), rejecting unknown fields, fills defaults and
// validates it. Every problem is reported at once with its field path.
func Parse(data []byte) (*Config, error) {
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("while parsing the mirror config: %w", err)
	}
	c.Default()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("invalid mirror config: %w", err)
	}
	return &c, nil
}

// Load reads, defaults and validates the config file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("while reading the mirror config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Marshal renders a config as YAML, the form the operator writes into the ConfigMap.
func Marshal(c *Config) ([]byte, error) {
	return yaml.Marshal(c)
}
