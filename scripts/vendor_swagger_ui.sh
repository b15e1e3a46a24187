#!/usr/bin/env bash
# Refresh the Swagger UI that /docs serves (src/shardsched/router/assets/swagger-ui/): the
# pre-built files of the swagger-ui-dist npm package, copied as published (nothing is built
# here; installing shardsched needs no Node toolchain). Swagger UI 5 reads OpenAPI 3.1,
# which /openapi.json is (Swagger UI 4 cannot render it). Needs npm; run from anywhere:
#   bash scripts/vendor_swagger_ui.sh [VERSION]
# then check /docs in a browser (tests/router/test_docs_browser.py does) and commit.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-5.35.0}
dest=src/shardsched/router/assets/swagger-ui
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "swagger-ui-dist@$version" >/dev/null && tar xzf ./*.tgz)
for f in swagger-ui-bundle.js swagger-ui.css LICENSE NOTICE swagger-ui-bundle.js.LICENSE.txt; do
  cp "$work/package/$f" "$dest/$f"
done
{
  echo "swagger-ui-dist $version (npm), copied as published by scripts/vendor_swagger_ui.sh"
  (cd "$dest" && sha256sum swagger-ui-bundle.js swagger-ui.css)
} > "$dest/SOURCE"
echo "vendored swagger-ui-dist $version into $dest"
