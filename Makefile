VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: venv test fuzz run chaos lint schema screenshots bench bench-store bench-audit bench-pipeline bench-client bench-web clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

test: lint
	$(PY) -m pytest -q

fuzz: $(STAMP)
	CONQUIAN_FUZZ=long $(PY) -m pytest -q -m fuzz --timeout 3600 tests/fuzz

run: $(STAMP)
	$(VENV)/bin/conquian serve

chaos: $(STAMP)
	$(VENV)/bin/conquian chaos --duration 180 --json --report .data/chaos-report.json

lint: $(STAMP)
	$(VENV)/bin/ruff check engine events services bench tests
	$(VENV)/bin/mypy --strict engine events services

schema: $(STAMP)
	$(PY) -m events.schema docs/schema && $(PY) -m services.gateway.asyncapi docs/asyncapi.json && $(PY) -m services.gateway.web_types docs/schema services/gateway/web/conquian-types.d.ts

screenshots: $(STAMP)
	$(PY) -m tests.browser.screenshots docs/screenshots

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

bench-web: $(STAMP)
	$(PY) bench/web_page.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
