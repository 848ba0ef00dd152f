package main

import "errors"

func renderPreview(path string) error { return errors.New("not yet") }
