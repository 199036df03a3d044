#!/usr/bin/env bash
# A local certificate authority and a server certificate it signs, for `murphy server
# --tls-cert/--tls-key` (`make up` with MURPHY_UP_TLS=1; docs/security.md "TLS").
#
#   infra/compose/local_ca.sh CA_DIR SERVER_DIR [NAME...]
#
# CA_DIR/ca.pem, CA_DIR/ca.key: the CA (EC P-256, 10 years), made once and kept: clients trust
#   ca.pem (AWS_CA_BUNDLE=CA_DIR/ca.pem for boto3 / the SageMaker SDK, or the system store).
# SERVER_DIR/server.pem, SERVER_DIR/server.key: a server certificate (EC P-256, 397 days, as
#   browsers accept) for localhost, 127.0.0.1, ::1 and every NAME (a DNS name or an IP address),
#   re-issued when missing, expiring within 30 days, or not naming every NAME.
# Keys are written mode 0600. Needs openssl.
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: $0 CA_DIR SERVER_DIR [NAME...]" >&2; exit 2; }
ca_dir=$1 server_dir=$2
shift 2
command -v openssl >/dev/null || { echo "local_ca.sh: openssl is not installed (apt-get install openssl)" >&2; exit 1; }
umask 077
mkdir -p "$ca_dir" "$server_dir"

if [[ ! -s $ca_dir/ca.pem || ! -s $ca_dir/ca.key ]]; then
    openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -sha256 -days 3650 \
        -subj "/CN=murphy local CA $(hostname)" -keyout "$ca_dir/ca.key.tmp" -out "$ca_dir/ca.pem.tmp" \
        -addext "basicConstraints=critical,CA:TRUE,pathlen:0" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -addext "subjectKeyIdentifier=hash" 2>/dev/null
    mv "$ca_dir/ca.key.tmp" "$ca_dir/ca.key"
    mv "$ca_dir/ca.pem.tmp" "$ca_dir/ca.pem"
    chmod 644 "$ca_dir/ca.pem"
    rm -f "$server_dir/server.pem"  # a new CA: the old server certificate is not its
fi

san="DNS:localhost,IP:127.0.0.1,IP:::1"
for name in "$@"; do
    if [[ $name =~ ^[0-9.]+$ || $name == *:* ]]; then san+=",IP:$name"; else san+=",DNS:$name"; fi
done

fresh() {
    [[ -s $server_dir/server.pem && -s $server_dir/server.key ]] || return 1
    openssl x509 -in "$server_dir/server.pem" -noout -checkend $((30 * 86400)) >/dev/null || return 1
    openssl verify -CAfile "$ca_dir/ca.pem" "$server_dir/server.pem" >/dev/null 2>&1 || return 1
    local have
    have=$(openssl x509 -in "$server_dir/server.pem" -noout -ext subjectAltName 2>/dev/null | tail -n +2 | tr -d ' ')
    have=${have//IPAddress:/IP:}
    local want
    IFS=, read -ra want <<<"$san"
    for w in "${want[@]}"; do
        [[ ,$have, == *",${w/IP:::1/IP:0:0:0:0:0:0:0:1},"* || ,$have, == *",$w,"* ]] || return 1
    done
}

if ! fresh; then
    ext=$(mktemp)
    csr=$(mktemp)
    trap 'rm -f "$ext" "$csr"' EXIT
    printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature" \
        "extendedKeyUsage=serverAuth" "subjectAltName=$san" "subjectKeyIdentifier=hash" \
        "authorityKeyIdentifier=keyid,issuer" >"$ext"
    openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -subj "/CN=localhost" \
        -keyout "$server_dir/server.key.tmp" -out "$csr" 2>/dev/null
    openssl x509 -req -in "$csr" -CA "$ca_dir/ca.pem" -CAkey "$ca_dir/ca.key" -CAcreateserial -days 397 -sha256 \
        -extfile "$ext" -out "$server_dir/server.pem.tmp" 2>/dev/null
    rm -f "$ca_dir/ca.srl"
    mv "$server_dir/server.key.tmp" "$server_dir/server.key"
    mv "$server_dir/server.pem.tmp" "$server_dir/server.pem"
    chmod 644 "$server_dir/server.pem"
fi
echo "$ca_dir/ca.pem"
