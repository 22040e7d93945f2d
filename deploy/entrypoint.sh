#!/bin/sh
# Entry point of the bot's image: one image, one process per container.
#
#   rasa      the Rasa server (5005): channels /webhooks/rest/ and /socket.io,
#             Rasa's HTTP API only with BOT_API_TOKEN
#   actions   the action server (5055)
#   web       the web app (8080): widget files, demo page, review pages
#   migrate   create or migrate the database schema, then exit
#   purge     delete conversations older than BOT_RETENTION_DAYS, then exit
#   anything else is run as given, e.g. "python -m bot users list"
#
# Settings: see deploy/README.md and deploy/env.example.
set -eu
set -f  # no globbing: BOT_ALLOWED_ORIGINS is split into words below
cd "${BOT_PROJECT_DIR:-/app}"

missing() {
    echo "bot-entrypoint: $1 is not set (see deploy/env.example)" >&2
    exit 64
}

# Refuse the placeholders of deploy/k8s/secret.yaml.
for name in BOT_SECRET_KEY BOT_API_TOKEN BOT_DB_URL REDIS_PASSWORD; do
    eval "value=\${$name:-}"
    case "$value" in
    *REPLACE*) echo "bot-entrypoint: $name still holds a placeholder (REPLACE...)" >&2; exit 64 ;;
    esac
done

case "${1:-rasa}" in
rasa)
    [ "$#" -gt 0 ] && shift
    [ -n "${BOT_API_TOKEN:-}" ] || missing BOT_API_TOKEN
    [ -n "${BOT_SECRET_KEY:-}" ] || missing BOT_SECRET_KEY
    [ -n "${BOT_DB_URL:-}" ] || missing BOT_DB_URL
    [ -n "${BOT_ALLOWED_ORIGINS:-}" ] || missing BOT_ALLOWED_ORIGINS
    # deploy/endpoints.yml reads these; Rasa refuses to start if one is undefined.
    [ -n "${ACTION_SERVER_URL:-}" ] || missing ACTION_SERVER_URL
    [ -n "${REDIS_HOST:-}" ] || missing REDIS_HOST
    [ -n "${REDIS_PORT:-}" ] || missing REDIS_PORT
    [ "${REDIS_PASSWORD+set}" = set ] || missing "REDIS_PASSWORD (may be empty)"
    model="${RASA_MODEL:-}"
    if [ -z "$model" ]; then
        # No model named: serve the live one (models/registry.json, written by
        # "python -m bot promote"), as "python -m bot run" does.
        model="$(python -c 'from bot import registry; m = registry.live_model(); print(m or "")')"
        [ -n "$model" ] || { echo "bot-entrypoint: no RASA_MODEL and no live model in models/registry.json" >&2; exit 66; }
    fi
    # With --enable-api Rasa starts without a model if the path is wrong: refuse instead.
    [ -f "$model" ] || { echo "bot-entrypoint: model $model not found" >&2; exit 66; }
    origins="$(printf '%s' "$BOT_ALLOWED_ORIGINS" | tr ',' ' ')"
    # bot.rasa_main is "rasa" started lighter (no TensorFlow, memory given back,
    # the model out of the garbage collector's way), as make run and make bench start it.
    # shellcheck disable=SC2086  # one --cors argument per origin
    exec python -m bot.rasa_main run \
        --model "$model" \
        --endpoints "${RASA_ENDPOINTS:-deploy/endpoints.yml}" \
        --credentials credentials.yml \
        --port 5005 \
        --enable-api --auth-token "$BOT_API_TOKEN" \
        --cors $origins \
        "$@"
    ;;
actions)
    shift
    exec python -m rasa_sdk --actions actions --port 5055 "$@"
    ;;
web)
    shift
    exec python -m waitress --host 0.0.0.0 --port 8080 --threads 8 "$@" --call bot.web:create_app
    ;;
migrate)
    shift
    exec python -m bot db-upgrade "$@"
    ;;
purge)
    shift
    exec python -m bot purge "$@"
    ;;
*)
    exec "$@"
    ;;
esac
