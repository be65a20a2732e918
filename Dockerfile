# Small, multi-stage, non-root image that runs `reactbot serve`.
FROM python:3.11-slim AS build
WORKDIR /src
# uv, pinned as in the Makefile, installs exactly uv.lock's versions (hashes checked).
RUN pip install --no-cache-dir uv==0.13.9
COPY pyproject.toml uv.lock README.md ./
COPY core ./core
COPY adapters ./adapters
COPY bot ./bot
# The otel extra: traces go out when OTEL_EXPORTER_OTLP_ENDPOINT is set (off otherwise).
RUN UV_PROJECT_ENVIRONMENT=/venv UV_PYTHON_DOWNLOADS=never \
    uv sync --frozen --no-editable --no-cache --extra otel --python /usr/local/bin/python

FROM python:3.11-slim
RUN useradd --create-home --uid 10001 reactbot
COPY --from=build /venv /venv
USER reactbot
WORKDIR /home/reactbot
ENV PATH=/venv/bin:$PATH PYTHONUNBUFFERED=1
# Configure with environment variables (secrets) and an optional mounted config file:
#   docker run -e DISCORD_TOKEN=... -e OPENAI_API_KEY=... -e REACTBOT_MODEL=... \
#     -v $PWD/config.yaml:/config.yaml -e REACTBOT_CONFIG=/config.yaml reactbot
# Any key can be a variable instead of the file (REACTBOT_WEB__ENABLED=true). The ops endpoint
# binds 127.0.0.1 unless told: add -e REACTBOT_OPS__HOST=0.0.0.0 to publish 9464 (compose does).
# 3000: Slack HTTP mode (slack.port); 9464: the ops endpoint (ops.port).
EXPOSE 3000 9464
CMD ["reactbot", "serve"]
