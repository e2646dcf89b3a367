# specsize serve in a container: the API and web UI, access-controlled, on SQLite in a volume or PostgreSQL.
#   docker build -t specsize .
#   docker run --rm -v specsize-data:/data specsize users add alice --role admin     # prints the token once
#   docker run -d -p 127.0.0.1:8000:8000 -v specsize-data:/data specsize
# Put a TLS-terminating reverse proxy in front of it (docs/service.md); the container listens on 0.0.0.0:8000,
# which `specsize serve` allows only once a user exists.
FROM python:3.11-slim
RUN useradd --create-home --uid 10001 specsize && mkdir /data && chown specsize /data
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir '.[service]' && rm -rf /src
USER specsize
ENV XDG_DATA_HOME=/data SPECSIZE_DB=/data/service.sqlite
VOLUME /data
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=3s CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=2)"
ENTRYPOINT ["specsize"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000", "--cookie-secure"]
