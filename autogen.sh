#!/bin/sh
# Generates configure and the Makefile templates (autoreconf only).
set -e
cd "$(dirname "$0")"
mkdir -p m4 build-aux
autoreconf --install --force
