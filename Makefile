VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: venv test fuzz run lint schema bench bench-store bench-audit bench-pipeline bench-client clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q

fuzz: $(STAMP)
	CONQUIAN_FUZZ=long $(PY) -m pytest -q -m fuzz --timeout 3600 tests/fuzz

run: $(STAMP)
	$(VENV)/bin/conquian serve

lint: $(STAMP)
	$(VENV)/bin/ruff check engine events && $(VENV)/bin/mypy --strict engine events

schema: $(STAMP)
	$(PY) -m events.schema docs/schema && $(PY) -m services.gateway.asyncapi docs/asyncapi.json

bench: $(STAMP)
	$(PY) bench/engine.py

bench-store: $(STAMP)
	$(PY) bench/store.py

bench-audit: $(STAMP)
	$(PY) bench/audit.py

bench-pipeline: $(STAMP)
	$(PY) bench/pipeline.py

bench-client: $(STAMP)
	$(PY) bench/redis_client.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
