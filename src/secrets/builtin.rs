//! The built-in detector table.
//!
//! Every row is one credential format: a stable kebab-case name, the keywords that
//! trigger it, where in a match those keywords sit, the regex that confirms it and an
//! optional entropy gate on the secret bytes.
//!
//! Conventions the engine relies on (checked by `tests/secrets_corpus.rs`):
//! - every match contains one of the row's keywords, `keyword_offset` bytes after the
//!   start of the match (most rows: the keyword *is* the start of the match);
//! - keywords are case-sensitive; a case-insensitive label is listed as its lower and
//!   upper spelling without the first letter (`assword`/`ASSWORD` covers `password`,
//!   `Password` and `PASSWORD`, with offset 1);
//! - a row whose secret is only part of the match names it `(?P<secret>...)`; only those
//!   bytes are reported and redacted (a password in a URL, the value of `api_key=`);
//! - `\b` means an ASCII word boundary here (rewritten to `(?-u:\b)` when the spec is built)
//!   so the lazy DFA never has to give up on non-ASCII text;
//! - everything else is written ASCII too: labels are `(?i-u:…)` and whitespace is
//!   `(?-u:\s)` or spelled out in a class. Credentials are ASCII, and a Unicode class
//!   or Unicode case folding (`k` also matching the Kelvin sign) makes the automaton
//!   several times larger and slower to build, for nothing a secret can contain. Only
//!   "any character" (`[\s\S]`, the body of a key block) stays Unicode, so a match
//!   always ends on a character boundary.
//!
//! Order matters: when matches overlap, the finding carries the name of the row listed
//! first, so specific formats come before the generic `key = value` rows.

use super::DetectorSpec;

/// One row of the table.
pub(super) struct Builtin {
    pub name: &'static str,
    pub keywords: &'static [&'static str],
    /// Bytes from the start of a match to its keyword, inclusive range.
    pub offset: (usize, usize),
    pub regex: &'static str,
    pub entropy: Option<f64>,
}

/// `label …= value` separator used by every labelled row: the rest of an identifier
/// (`password_hash`, `SECRET_KEY`), an optional closing quote, then `=`, `:`, `:=` or `=>`.
/// The rest of the identifier is at most 48 bytes: unbounded, a search at every label of
/// a long identifier-shaped run (`SECRETKEY` repeated) read to the end of the run looking
/// for the `=`, which made such a text scan at 70 MB/s; bounded, the walk dies within
/// a few dozen bytes and the next label's walk over the same bytes is remembered.
macro_rules! assign {
    () => {
        r#"(?:[_.-][A-Za-z0-9_.-]{0,47}|[A-Z][A-Za-z0-9_.-]{0,47})?["'`]?(?-u:\s){0,4}(?::=|=>|:|=)(?-u:\s){0,4}["'`]?"#
    };
}

/// The separator after a generic label (`password`, `secret`, `token`, `api_key`):
/// only a short list of suffixes, so `secret_name`, `token_type` or `password_file`
/// (which hold names, kinds and paths) are not read as secrets.
macro_rules! generic_assign {
    () => {
        r#"(?:[_.-]?(?i-u:key|value|secret|token|access[_.-]?key|str|string|hash|b64|base64))?["'`]?(?-u:\s){0,4}(?::=|=>|:|=)(?-u:\s){0,4}["'`]?"#
    };
}

/// A labelled vendor credential: `(?i-u:label)…= <value>`.
macro_rules! labelled {
    ($label:literal, $value:literal) => {
        concat!("(?i-u:", $label, ")", assign!(), "(?P<secret>", $value, ")")
    };
}

const fn row(
    name: &'static str,
    keywords: &'static [&'static str],
    regex: &'static str,
    entropy: Option<f64>,
) -> Builtin {
    Builtin {
        name,
        keywords,
        offset: (0, 0),
        regex,
        entropy,
    }
}

const fn row_at(
    name: &'static str,
    keywords: &'static [&'static str],
    offset: (usize, usize),
    regex: &'static str,
    entropy: Option<f64>,
) -> Builtin {
    Builtin {
        name,
        keywords,
        offset,
        regex,
        entropy,
    }
}

/// Gate for random-looking bodies of at least ~20 characters: real keys sit near
/// 4–5 bits per byte (an unlucky 20-character AWS key id can dip to 2.9),
/// placeholders (`xxxx…`, `AKIAAAAA…`) sit below 1.5.
const RANDOM: Option<f64> = Some(2.5);
/// Gate for generic `key = value` rows, whose values are shorter and wordier.
const GENERIC: Option<f64> = Some(3.2);

const SECRET_KW: &[&str] = &["ecret", "ECRET"];
const TOKEN_KW: &[&str] = &["oken", "OKEN"];
const PASSWORD_KW: &[&str] = &["assword", "ASSWORD", "asswd", "ASSWD"];
const API_KEY_KW: &[&str] = &[
    "pi_key", "PI_KEY", "pikey", "PIKEY", "piKey", "pi-key", "pi-Key",
];
const URL_KW: &[&str] = &["://"];

pub(super) const BUILTINS: &[Builtin] = &[
    // ---- private keys: whole blocks, header to footer -------------------------------
    row(
        "gcp-service-account-key",
        &[r#""private_key""#],
        r#""private_key"(?-u:\s)*:(?-u:\s)*"(?P<secret>-----BEGIN[ A-Z]*PRIVATE KEY-----[^"]*?-----END[ A-Z]*PRIVATE KEY-----(?:\\n)?)""#,
        None,
    ),
    row(
        "private-key",
        &["-----BEGIN"],
        // With a footer: the whole block. Without (a truncated paste): header plus body.
        r"-----BEGIN[ A-Z0-9]*PRIVATE KEY-----(?:[\s\S]*?-----END[ A-Z0-9]*PRIVATE KEY-----|[A-Za-z0-9+/=\t\n\x0B\f\r \\:,.-]*)",
        None,
    ),
    row(
        "pgp-private-key-block",
        &["-----BEGIN"],
        r"-----BEGIN PGP PRIVATE KEY BLOCK-----(?:[\s\S]*?-----END PGP PRIVATE KEY BLOCK-----|[A-Za-z0-9+/=\t\n\x0B\f\r \\:,.-]*)",
        None,
    ),
    row(
        "putty-private-key",
        &["PuTTY-User-Key-File-"],
        r"PuTTY-User-Key-File-[23]: [\s\S]*?Private-MAC: [0-9a-fA-F]{20,}",
        None,
    ),
    // A key's body with neither header nor footer, found by its structure: the start of
    // its DER (or OpenSSH) encoding is fixed bytes, so its base64 is a fixed prefix.
    // OpenSSH (`openssh-key-v1\0`, RSA and ed25519 alike); PKCS#1 RSA (`SEQUENCE`,
    // version 0, `INTEGER` modulus: `IBAAKC` after six characters); PKCS#8 RSA
    // (`rsaEncryption` OID); PKCS#8 EC (`ecPublicKey` OID after eleven characters); SEC1
    // EC (P-256 and P-384 `ECPrivateKey`); PKCS#8 ed25519. The body runs over base64 lines
    // (real or escaped line breaks) to its padding.
    row_at(
        "private-key-body",
        &[
            "b3BlbnNzaC1rZXktdjE",
            "MHcCAQEEI",
            "MIGkAgEBBD",
            "MC4CAQAwBQYDK2VwBCIEI",
            "IBAAKC",
            "IBADANBgkqhkiG9w0",
            "GByqGSM49AgE",
        ],
        (0, 11),
        r"(?:b3BlbnNzaC1rZXktdjE|MHcCAQEEI|MIGkAgEBBD|MC4CAQAwBQYDK2VwBCIEI|MII[A-Za-z0-9+/]{3}IBAAKC|MII[A-Za-z0-9+/]{3}IBADANBgkqhkiG9w0|MIG[A-Za-z0-9+/]AgEAMB[A-Za-z0-9+/]GByqGSM49AgE)[A-Za-z0-9+/]{24,}(?:(?:\r?\n|\\n)[A-Za-z0-9+/]{4,})*={0,2}",
        RANDOM,
    ),
    row(
        "age-secret-key",
        &["AGE-SECRET-KEY-1"],
        r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
        None,
    ),
    // ---- Provider tokens with a published prefix (CI, registries, databases, clouds,
    // AI and payment APIs); listed before the older rows so a longer prefix names its
    // finding (`sk-or-v1-` before a generic `sk-`).
    row(
        "gitlab-ci-build-token",
        &["glcbt-"],
        r"\bglcbt-[A-Za-z0-9_-]{20,}",
        RANDOM,
    ),
    row(
        "gitlab-agent-token",
        &["glagent-"],
        r"\bglagent-[A-Za-z0-9_-]{50}",
        RANDOM,
    ),
    row(
        "gitlab-oauth-app-secret",
        &["gloas-"],
        r"\bgloas-[a-f0-9]{64}",
        RANDOM,
    ),
    row(
        "gitlab-feature-flag-token",
        &["glffct-"],
        r"\bglffct-[A-Za-z0-9_-]{20}",
        RANDOM,
    ),
    row(
        "gitlab-scim-token",
        &["glsoat-"],
        r"\bglsoat-[A-Za-z0-9_-]{20}",
        RANDOM,
    ),
    row(
        "gitlab-incoming-mail-token",
        &["glimt-"],
        r"\bglimt-[A-Za-z0-9_-]{25}",
        RANDOM,
    ),
    row(
        "databricks-token",
        &["dapi"],
        r"\bdapi[a-f0-9]{32}(?:-[0-9])?",
        RANDOM,
    ),
    row(
        "grafana-cloud-token",
        &["glc_"],
        r"\bglc_[A-Za-z0-9+/]{32,400}={0,2}",
        RANDOM,
    ),
    row(
        "grafana-service-account-token",
        &["glsa_"],
        r"\bglsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}",
        RANDOM,
    ),
    row(
        "planetscale-token",
        &["pscale_tkn_"],
        r"\bpscale_tkn_[A-Za-z0-9_.-]{43}",
        RANDOM,
    ),
    row(
        "planetscale-password",
        &["pscale_pw_"],
        r"\bpscale_pw_[A-Za-z0-9_.-]{43}",
        RANDOM,
    ),
    row(
        "planetscale-oauth-token",
        &["pscale_oauth_"],
        r"\bpscale_oauth_[A-Za-z0-9_.-]{32,64}",
        RANDOM,
    ),
    row(
        "supabase-access-token",
        &["sbp_"],
        r"\bsbp_[a-f0-9]{40}",
        RANDOM,
    ),
    row(
        "supabase-secret-key",
        &["sb_secret_"],
        r"\bsb_secret_[A-Za-z0-9_-]{31,}",
        RANDOM,
    ),
    row("flyio-token", &["fo1_"], r"\bfo1_[A-Za-z0-9_-]{43}", RANDOM),
    row(
        "pulumi-access-token",
        &["pul-"],
        r"\bpul-[a-f0-9]{40}",
        RANDOM,
    ),
    row(
        "mapbox-secret-token",
        &["sk.eyJ"],
        r"\bsk\.eyJ[A-Za-z0-9_-]{50,}\.[A-Za-z0-9_-]{20,}",
        RANDOM,
    ),
    row("figma-pat", &["figd_"], r"\bfigd_[A-Za-z0-9_-]{40}", RANDOM),
    row(
        "frameio-token",
        &["fio-u-"],
        r"\bfio-u-[A-Za-z0-9_=-]{64}",
        RANDOM,
    ),
    row(
        "dynatrace-token",
        &["dt0c01."],
        r"\bdt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}",
        RANDOM,
    ),
    row(
        "contentful-pat",
        &["CFPAT-"],
        r"\bCFPAT-[A-Za-z0-9_-]{43}",
        RANDOM,
    ),
    row(
        "typeform-token",
        &["tfp_"],
        r"\btfp_[A-Za-z0-9_.=-]{59}",
        RANDOM,
    ),
    row(
        "brevo-api-key",
        &["xkeysib-"],
        r"\bxkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}",
        RANDOM,
    ),
    row(
        "adafruit-io-key",
        &["aio_"],
        r"\baio_[A-Za-z0-9]{28}",
        RANDOM,
    ),
    row(
        "prefect-api-key",
        &["pnu_"],
        r"\bpnu_[A-Za-z0-9]{36}",
        RANDOM,
    ),
    row("readme-api-key", &["rdme_"], r"\brdme_[a-z0-9]{70}", RANDOM),
    row(
        "scalingo-token",
        &["tk-us-"],
        r"\btk-us-[A-Za-z0-9_-]{48}",
        RANDOM,
    ),
    row(
        "sourcegraph-token",
        &["sgp_"],
        r"\bsgp_(?:[a-f0-9]{16}_)?[a-f0-9]{40}",
        RANDOM,
    ),
    row(
        "tailscale-key",
        &["tskey-"],
        r"\btskey-(?:api|auth|client|webhook|scim)-[A-Za-z0-9]{10,}-[A-Za-z0-9]{20,}",
        RANDOM,
    ),
    row(
        "infracost-api-key",
        &["ico-"],
        r"\bico-[A-Za-z0-9]{32}",
        RANDOM,
    ),
    row(
        "clojars-token",
        &["CLOJARS_"],
        r"\bCLOJARS_[a-f0-9]{60}",
        RANDOM,
    ),
    row(
        "alibaba-access-key-id",
        &["LTAI"],
        r"\bLTAI[A-Za-z0-9]{20}",
        RANDOM,
    ),
    row(
        "tencent-secret-id",
        &["AKID"],
        r"\bAKID[A-Za-z0-9]{32}",
        RANDOM,
    ),
    row(
        "openrouter-api-key",
        &["sk-or-v1-"],
        r"\bsk-or-v1-[a-f0-9]{64}",
        RANDOM,
    ),
    row(
        "langsmith-api-key",
        &["lsv2_"],
        r"\blsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}",
        RANDOM,
    ),
    row(
        "pinecone-api-key",
        &["pcsk_"],
        r"\bpcsk_[A-Za-z0-9]{5,6}_[A-Za-z0-9]{60,70}",
        RANDOM,
    ),
    row(
        "circleci-pat",
        &["CCIPAT_"],
        r"\bCCIPAT_[A-Za-z0-9]{22}_[a-f0-9]{40}",
        RANDOM,
    ),
    row(
        "buildkite-token",
        &["bkua_"],
        r"\bbkua_[a-f0-9]{40}",
        RANDOM,
    ),
    row("jfrog-api-key", &["AKCp"], r"\bAKCp[A-Za-z0-9]{69}", RANDOM),
    row("crates-io-token", &["cio"], r"\bcio[A-Za-z0-9]{32}", RANDOM),
    row(
        "honeycomb-ingest-key",
        &["hcaik_"],
        r"\bhcaik_[A-Za-z0-9]{58}",
        RANDOM,
    ),
    row(
        "posthog-personal-api-key",
        &["phx_"],
        r"\bphx_[A-Za-z0-9]{43}",
        RANDOM,
    ),
    row(
        "render-api-key",
        &["rnd_"],
        r"\brnd_[A-Za-z0-9]{32}",
        RANDOM,
    ),
    row(
        "deno-deploy-token",
        &["ddp_"],
        r"\bddp_[A-Za-z0-9]{36}",
        RANDOM,
    ),
    row(
        "neon-api-key",
        &["napi_"],
        r"\bnapi_[A-Za-z0-9]{64}",
        RANDOM,
    ),
    row(
        "shippo-api-token",
        &["shippo_"],
        r"\bshippo_(?:live|test)_[a-f0-9]{40}",
        RANDOM,
    ),
    row(
        "easypost-api-key",
        &["EZAK", "EZTK"],
        r"\bEZ[AT]K[A-Za-z0-9]{54}",
        RANDOM,
    ),
    row(
        "flutterwave-secret-key",
        &["FLWSECK"],
        r"\bFLWSECK(?:_TEST)?-[a-f0-9]{32}-X",
        RANDOM,
    ),
    row(
        "razorpay-key",
        &["rzp_"],
        r"\brzp_(?:live|test)_[A-Za-z0-9]{14}",
        RANDOM,
    ),
    row(
        "duffel-api-token",
        &["duffel_"],
        r"\bduffel_(?:test|live)_[A-Za-z0-9_=-]{43}",
        RANDOM,
    ),
    row(
        "sonarqube-token",
        &["squ_", "sqp_", "sqa_"],
        r"\bsq[upa]_[a-f0-9]{40}",
        RANDOM,
    ),
    row_at(
        "firebase-fcm-server-key",
        &["APA91b"],
        (12, 12),
        r"\bAAAA[A-Za-z0-9_-]{7}:APA91b[A-Za-z0-9_-]{134}",
        RANDOM,
    ),
    row(
        "intercom-access-token",
        &["dG9rOi"],
        r"\bdG9rOi[A-Za-z0-9+/]{50,}={0,2}",
        RANDOM,
    ),
    // ---- AWS -------------------------------------------------------------------------
    // A secret access key with no label, right after its key id (`AKIA…,wJalr…` in a
    // credentials CSV, `AKIA… wJalr…`, `id: AKIA…\nsecret…` on the next line): 40
    // characters of base64 are a secret next to a key id. Listed before the key id's row
    // so that the key id's finding does not hide the hit.
    row(
        "aws-secret-access-key-unlabelled",
        &["AKIA", "ASIA"],
        r#"\b(?:AKIA|ASIA)[A-Z0-9]{16}["']?(?:[ \t]*[,:;|=][ \t]*|[ \t]+|[ \t]*\r?\n[ \t]*)["']?(?P<secret>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)"#,
        RANDOM,
    ),
    row(
        "aws-access-key-id",
        &["AKIA", "ASIA", "ABIA", "ACCA"],
        // Also written in groups of four (`AKIA-ABCD-EFGH-…`, with `-`, `_`, `.` or a
        // space), as a key id is read out or pasted from a form.
        r"\b(?:AKIA|ASIA|ABIA|ACCA)(?:[A-Z0-9]{16}|(?:[-_. ][A-Z0-9]{4}){4})\b",
        RANDOM,
    ),
    row_at(
        "aws-secret-access-key",
        SECRET_KW,
        (1, 1),
        concat!(
            r"(?i-u:secret_?(?:access_?)?key)",
            assign!(),
            r"(?P<secret>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)"
        ),
        RANDOM,
    ),
    // ---- Google Cloud ----------------------------------------------------------------
    row("gcp-api-key", &["AIza"], r"\bAIza[0-9A-Za-z_-]{35}", RANDOM),
    row(
        "gcp-oauth-client-secret",
        &["GOCSPX-"],
        r"\bGOCSPX-[A-Za-z0-9_-]{28}",
        RANDOM,
    ),
    row(
        "google-oauth-access-token",
        &["ya29."],
        r"\bya29\.[0-9A-Za-z_-]{30,}",
        RANDOM,
    ),
    row(
        "google-oauth-refresh-token",
        &["1//0"],
        r"\b1//0[0-9A-Za-z_-]{40,}",
        RANDOM,
    ),
    // ---- Azure -----------------------------------------------------------------------
    row(
        "azure-storage-connection-string",
        &["DefaultEndpointsProtocol="],
        r"DefaultEndpointsProtocol=https?;[!-~]{0,200}?AccountKey=(?P<secret>[A-Za-z0-9+/]{86}==)",
        None,
    ),
    row(
        "azure-storage-account-key",
        &["AccountKey="],
        r"AccountKey=(?P<secret>[A-Za-z0-9+/]{86}==)",
        None,
    ),
    row(
        "azure-service-bus-key",
        &["SharedAccessKey="],
        r"SharedAccessKey=(?P<secret>[A-Za-z0-9+/]{42,44}=)",
        None,
    ),
    row(
        "azure-sas-token",
        &["sv=20"],
        r"sv=20[0-9]{2}-[0-9]{2}-[0-9]{2}&[!-~]{0,400}?sig=(?P<secret>[A-Za-z0-9%+/]{40,120}(?:%3D|=){0,2})",
        None,
    ),
    row_at(
        "azure-client-secret",
        SECRET_KW,
        (1, 1),
        concat!(
            r"(?i-u:secret)",
            assign!(),
            r"(?P<secret>[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34})"
        ),
        RANDOM,
    ),
    // ---- GitHub ----------------------------------------------------------------------
    row(
        "github-token",
        &["ghp_"],
        r"\bghp_[A-Za-z0-9]{36}\b",
        RANDOM,
    ),
    row(
        "github-oauth-token",
        &["gho_"],
        r"\bgho_[A-Za-z0-9]{36}\b",
        RANDOM,
    ),
    row(
        "github-user-token",
        &["ghu_"],
        r"\bghu_[A-Za-z0-9]{36}\b",
        RANDOM,
    ),
    row(
        "github-app-token",
        &["ghs_"],
        r"\bghs_[A-Za-z0-9]{36}\b",
        RANDOM,
    ),
    row(
        "github-refresh-token",
        &["ghr_"],
        r"\bghr_[A-Za-z0-9]{36,}\b",
        RANDOM,
    ),
    row(
        "github-fine-grained-pat",
        &["github_pat_"],
        r"\bgithub_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}\b",
        RANDOM,
    ),
    // ---- GitLab ----------------------------------------------------------------------
    row(
        "gitlab-pat",
        &["glpat-"],
        r"\bglpat-[A-Za-z0-9_.-]{20,}",
        RANDOM,
    ),
    row(
        "gitlab-runner-token",
        &["glrt-"],
        r"\bglrt-[A-Za-z0-9_.-]{20,}",
        RANDOM,
    ),
    row(
        "gitlab-runner-registration-token",
        &["GR1348941"],
        r"\bGR1348941[A-Za-z0-9_-]{20,}",
        RANDOM,
    ),
    row(
        "gitlab-deploy-token",
        &["gldt-"],
        r"\bgldt-[A-Za-z0-9_-]{20,}",
        RANDOM,
    ),
    row(
        "gitlab-pipeline-trigger-token",
        &["glptt-"],
        r"\bglptt-[0-9a-f]{40}",
        RANDOM,
    ),
    // ---- Atlassian / Bitbucket -------------------------------------------------------
    row(
        "atlassian-api-token",
        &["ATATT3"],
        r"\bATATT3[A-Za-z0-9_=-]{180,}",
        RANDOM,
    ),
    row(
        "bitbucket-access-token",
        &["ATCTT3"],
        r"\bATCTT3[A-Za-z0-9_=-]{180,}",
        RANDOM,
    ),
    row(
        "bitbucket-app-password",
        &["ATBB"],
        r"\bATBB[A-Za-z0-9]{32}[0-9A-F]{8}\b",
        RANDOM,
    ),
    // ---- Slack, Discord, Telegram ----------------------------------------------------
    row(
        "slack-bot-token",
        &["xoxb-"],
        r"\bxoxb-[0-9]{10,13}-[0-9]{10,13}-[A-Za-z0-9]{24}\b",
        RANDOM,
    ),
    row(
        "slack-user-token",
        &["xoxp-"],
        r"\bxoxp-[0-9]{10,13}-[0-9]{10,13}-[0-9]{10,13}-[a-f0-9]{32}\b",
        RANDOM,
    ),
    row(
        "slack-config-token",
        &["xoxe"],
        r"\bxoxe(?:\.xox[bp])?-1-[A-Za-z0-9]{140,}\b",
        RANDOM,
    ),
    row(
        "slack-token",
        &["xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-"],
        r"\bxox[abposr]-[A-Za-z0-9-]{20,}",
        RANDOM,
    ),
    row(
        "slack-app-token",
        &["xapp-"],
        r"\bxapp-[0-9]-[A-Z0-9]{9,12}-[0-9]{10,14}-[a-f0-9]{64}\b",
        RANDOM,
    ),
    row(
        "slack-webhook-url",
        &["hooks.slack.com"],
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>T[A-Z0-9]{8,12}/[A-Z0-9]{8,12}/[A-Za-z0-9]{24,})",
        None,
    ),
    row_at(
        "discord-webhook-url",
        &["iscord"],
        (1, 1),
        r"discord(?:app)?\.com/api/webhooks/[0-9]{17,20}/(?P<secret>[A-Za-z0-9_-]{60,})",
        RANDOM,
    ),
    row_at(
        "discord-bot-token",
        &["iscord", "ISCORD"],
        (1, 1),
        labelled!(
            "discord",
            r"[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38}"
        ),
        RANDOM,
    ),
    row_at(
        "telegram-bot-token",
        &[":AA"],
        (8, 10),
        r"\b[0-9]{8,10}:AA[A-Za-z0-9_-]{33}",
        RANDOM,
    ),
    // ---- Messaging and e-mail --------------------------------------------------------
    row_at(
        "twilio-api-key",
        &["wilio", "WILIO"],
        (1, 1),
        labelled!("twilio", r"SK[0-9a-fA-F]{32}"),
        RANDOM,
    ),
    row_at(
        "twilio-auth-token",
        &["wilio", "WILIO"],
        (1, 1),
        labelled!("twilio", r"[0-9a-f]{32}"),
        RANDOM,
    ),
    row(
        "sendgrid-api-key",
        &["SG."],
        r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}",
        RANDOM,
    ),
    row(
        "mailgun-api-key",
        &["key-"],
        r"\bkey-[0-9a-f]{32}\b",
        RANDOM,
    ),
    row_at(
        "mailchimp-api-key",
        &["-us"],
        (32, 32),
        r"\b[0-9a-f]{32}-us[0-9]{1,2}\b",
        RANDOM,
    ),
    // ---- Payments --------------------------------------------------------------------
    row_at(
        "stripe-secret-key",
        &["k_live_", "k_test_"],
        (1, 1),
        r"\bsk_(?:live|test)_[A-Za-z0-9]{24,}\b",
        RANDOM,
    ),
    row_at(
        "stripe-restricted-key",
        &["k_live_", "k_test_"],
        (1, 1),
        r"\brk_(?:live|test)_[A-Za-z0-9]{24,}\b",
        RANDOM,
    ),
    row(
        "stripe-webhook-secret",
        &["whsec_"],
        r"\bwhsec_[A-Za-z0-9+/=]{32,}",
        RANDOM,
    ),
    row(
        "square-access-token",
        &["sq0atp-", "EAAA"],
        r"\b(?:sq0atp-[A-Za-z0-9_-]{22}|EAAA[A-Za-z0-9_-]{60})",
        RANDOM,
    ),
    row(
        "square-oauth-secret",
        &["sq0csp-"],
        r"\bsq0csp-[A-Za-z0-9_-]{43}",
        RANDOM,
    ),
    row(
        "shopify-access-token",
        &["shpat_", "shpca_", "shppa_"],
        r"\bshp(?:at|ca|pa)_[a-fA-F0-9]{32}\b",
        RANDOM,
    ),
    row(
        "shopify-shared-secret",
        &["shpss_"],
        r"\bshpss_[a-fA-F0-9]{32}\b",
        RANDOM,
    ),
    row(
        "paypal-braintree-access-token",
        &["access_token$"],
        r"access_token\$(?:production|sandbox)\$[0-9a-z]{16}\$[0-9a-f]{32}",
        None,
    ),
    // ---- AI providers ----------------------------------------------------------------
    row(
        "anthropic-api-key",
        &["sk-ant-api03-"],
        r"\bsk-ant-api03-[A-Za-z0-9_-]{80,}",
        RANDOM,
    ),
    row(
        "anthropic-admin-key",
        &["sk-ant-admin01-"],
        r"\bsk-ant-admin01-[A-Za-z0-9_-]{80,}",
        RANDOM,
    ),
    row(
        "openai-project-key",
        &["sk-proj-"],
        r"\bsk-proj-[A-Za-z0-9_-]{40,}",
        RANDOM,
    ),
    row(
        "openai-service-account-key",
        &["sk-svcacct-"],
        r"\bsk-svcacct-[A-Za-z0-9_-]{40,}",
        RANDOM,
    ),
    row(
        "openai-admin-key",
        &["sk-admin-"],
        r"\bsk-admin-[A-Za-z0-9_-]{40,}",
        RANDOM,
    ),
    row_at(
        "openai-api-key",
        &["T3BlbkFJ"],
        (23, 23),
        r"\bsk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}\b",
        RANDOM,
    ),
    row(
        "huggingface-token",
        &["hf_"],
        r"\bhf_[A-Za-z]{34}\b",
        RANDOM,
    ),
    row_at(
        "cohere-api-key",
        &["ohere", "OHERE"],
        (1, 1),
        labelled!("cohere", r"[A-Za-z0-9]{40}"),
        RANDOM,
    ),
    row(
        "replicate-api-token",
        &["r8_"],
        r"\br8_[A-Za-z0-9]{37}\b",
        RANDOM,
    ),
    row(
        "groq-api-key",
        &["gsk_"],
        r"\bgsk_[A-Za-z0-9]{52}\b",
        RANDOM,
    ),
    row(
        "perplexity-api-key",
        &["pplx-"],
        r"\bpplx-[A-Za-z0-9]{48}\b",
        RANDOM,
    ),
    row("xai-api-key", &["xai-"], r"\bxai-[A-Za-z0-9]{80}\b", RANDOM),
    // ---- Package registries ----------------------------------------------------------
    row("npm-token", &["npm_"], r"\bnpm_[A-Za-z0-9]{36}\b", RANDOM),
    row(
        "pypi-token",
        &["pypi-AgE"],
        r"\bpypi-AgE[A-Za-z0-9_-]{50,}",
        RANDOM,
    ),
    row(
        "rubygems-api-key",
        &["rubygems_"],
        r"\brubygems_[a-f0-9]{48}\b",
        RANDOM,
    ),
    row("nuget-api-key", &["oy2"], r"\boy2[a-z0-9]{43}\b", RANDOM),
    row(
        "docker-hub-token",
        &["dckr_"],
        r"\bdckr_(?:pat|oat)_[A-Za-z0-9_-]{27,40}",
        RANDOM,
    ),
    // ---- Hosting and infrastructure --------------------------------------------------
    row(
        "heroku-api-key",
        &["HRKU-"],
        r"\bHRKU-[A-Za-z0-9_-]{60}",
        RANDOM,
    ),
    row_at(
        "heroku-api-key-labelled",
        &["eroku", "EROKU"],
        (1, 1),
        labelled!(
            "heroku",
            r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
        ),
        None,
    ),
    row_at(
        "digitalocean-token",
        &["_v1_"],
        (3, 3),
        r"\bdo[por]_v1_[a-f0-9]{64}\b",
        RANDOM,
    ),
    row(
        "netlify-token",
        &["nfp_"],
        r"\bnfp_[A-Za-z0-9]{36}\b",
        RANDOM,
    ),
    row_at(
        "netlify-token-labelled",
        &["etlify", "ETLIFY"],
        (1, 1),
        labelled!("netlify", r"[A-Za-z0-9_-]{40,46}"),
        RANDOM,
    ),
    row_at(
        "vercel-token",
        &["ercel", "ERCEL"],
        (1, 1),
        labelled!("vercel", r"[A-Za-z0-9]{24}"),
        RANDOM,
    ),
    row_at(
        "cloudflare-api-token",
        &["loudflare", "LOUDFLARE"],
        (1, 1),
        labelled!("cloudflare", r"[A-Za-z0-9_-]{40}"),
        RANDOM,
    ),
    row_at(
        "cloudflare-global-api-key",
        &["loudflare", "LOUDFLARE"],
        (1, 1),
        labelled!("cloudflare", r"[a-f0-9]{37}"),
        RANDOM,
    ),
    row(
        "cloudflare-origin-ca-key",
        &["v1.0-"],
        r"\bv1\.0-[a-f0-9]{24}-[a-f0-9]{146}\b",
        RANDOM,
    ),
    row(
        "hashicorp-vault-token",
        &["hvs.", "hvb."],
        r"\bhv[sb]\.[A-Za-z0-9_-]{90,}",
        RANDOM,
    ),
    row(
        "hashicorp-vault-recovery-token",
        &["hvr."],
        r"\bhvr\.[A-Za-z0-9_-]{90,}",
        RANDOM,
    ),
    row_at(
        "terraform-cloud-token",
        &[".atlasv1."],
        (14, 14),
        r"\b[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70}",
        RANDOM,
    ),
    row(
        "doppler-token",
        &["dp."],
        r"\bdp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}\b",
        RANDOM,
    ),
    row(
        "onepassword-service-account-token",
        &["ops_eyJ"],
        r"\bops_eyJ[A-Za-z0-9+/=_-]{100,}",
        RANDOM,
    ),
    // ---- Observability and SaaS ------------------------------------------------------
    row_at(
        "datadog-api-key",
        &["atadog", "ATADOG"],
        (1, 1),
        labelled!("datadog", r"[a-f0-9]{40}|[a-f0-9]{32}"),
        RANDOM,
    ),
    row(
        "newrelic-user-api-key",
        &["NRAK-"],
        r"\bNRAK-[A-Z0-9]{27}\b",
        RANDOM,
    ),
    row(
        "newrelic-insert-key",
        &["NRII-"],
        r"\bNRII-[A-Za-z0-9_-]{32}",
        RANDOM,
    ),
    row(
        "newrelic-browser-key",
        &["NRJS-"],
        r"\bNRJS-[a-f0-9]{19}\b",
        RANDOM,
    ),
    row_at(
        "newrelic-license-key",
        &["NRAL"],
        (36, 36),
        r"\b[a-f0-9]{36}NRAL\b",
        RANDOM,
    ),
    row(
        "sentry-auth-token",
        &["sntry"],
        r"\bsntry[su]_[A-Za-z0-9+/=_-]{60,}",
        RANDOM,
    ),
    row_at(
        "sentry-dsn",
        URL_KW,
        (0, 0),
        r"://(?P<secret>[0-9a-f]{32})(?::[0-9a-f]{32})?@[A-Za-z0-9.-]+/[0-9]+",
        None,
    ),
    row(
        "linear-api-key",
        &["lin_api_", "lin_oaut"],
        r"\blin_(?:api_[A-Za-z0-9]{40}|oauth_[a-f0-9]{64})\b",
        RANDOM,
    ),
    row_at(
        "notion-integration-token",
        &["ecret_"],
        (1, 1),
        r"\bsecret_[A-Za-z0-9]{43}\b",
        RANDOM,
    ),
    row(
        "notion-api-token",
        &["ntn_"],
        r"\bntn_[0-9]{11}[A-Za-z0-9]{35}\b",
        RANDOM,
    ),
    row(
        "postman-api-key",
        &["PMAK-"],
        r"\bPMAK-[a-f0-9]{24}-[a-f0-9]{34}\b",
        RANDOM,
    ),
    // ---- Tokens by structure ---------------------------------------------------------
    row(
        "jwt",
        &["eyJhbGci", "eyJ0eXAi", "eyJraWQi"],
        r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        None,
    ),
    // ---- Connection strings and URLs with passwords ----------------------------------
    row(
        "postgres-url-password",
        &["postgres"],
        r#"postgres(?:ql)?://[!-~&&[^:@/?#"'<>]]{0,128}:(?P<secret>[!-~&&[^:@/?#"'<>$]][!-~&&[^@/?#"'<>]]{0,255})@"#,
        None,
    ),
    row(
        "mysql-url-password",
        &["mysql:"],
        r#"mysql://[!-~&&[^:@/?#"'<>]]{0,128}:(?P<secret>[!-~&&[^:@/?#"'<>$]][!-~&&[^@/?#"'<>]]{0,255})@"#,
        None,
    ),
    row(
        "mongodb-url-password",
        &["mongodb"],
        r#"mongodb(?:\+srv)?://[!-~&&[^:@/?#"'<>]]{0,128}:(?P<secret>[!-~&&[^:@/?#"'<>$]][!-~&&[^@/?#"'<>]]{0,255})@"#,
        None,
    ),
    row(
        "redis-url-password",
        &["redis"],
        r#"rediss?://[!-~&&[^:@/?#"'<>]]{0,128}:(?P<secret>[!-~&&[^:@/?#"'<>$]][!-~&&[^@/?#"'<>]]{0,255})@"#,
        None,
    ),
    row(
        "amqp-url-password",
        &["amqp"],
        r#"amqps?://[!-~&&[^:@/?#"'<>]]{0,128}:(?P<secret>[!-~&&[^:@/?#"'<>$]][!-~&&[^@/?#"'<>]]{0,255})@"#,
        None,
    ),
    row_at(
        "url-basic-auth",
        URL_KW,
        (0, 0),
        r#"://[!-~&&[^:@/?#"'<>]]{1,128}:(?P<secret>[!-~&&[^:@/?#"'<>$]][!-~&&[^@/?#"'<>]]{0,255})@"#,
        None,
    ),
    // ---- Generic labelled assignments (last: specific formats win overlaps) ----------
    row_at(
        "http-authorization-header",
        &["uthorization", "UTHORIZATION"],
        (1, 1),
        r#"(?i-u:authorization)["']?(?-u:\s){0,4}[:=](?-u:\s){0,4}["']?(?:(?i-u:basic|bearer|token|digest)(?-u:\s)+)?(?P<secret>[A-Za-z0-9_.~+/-]{8,}={0,2})"#,
        Some(3.0),
    ),
    row_at(
        "http-bearer-token",
        &["earer", "EARER"],
        (1, 1),
        r"(?i-u:bearer)(?-u:\s)+(?P<secret>[A-Za-z0-9_.~+/-]{16,}={0,2})",
        GENERIC,
    ),
    // A password given after a command-line flag (`--password …`, `--db-password …`,
    // `-password …`; `--password-stdin` names no value). A row of its own, keyed on the
    // dash, so a text of repeated `password=` labels pays nothing for it.
    row(
        "password-flag",
        &["-password", "-Password", "-PASSWORD", "-passwd", "-PASSWD"],
        r#"-(?i-u:passwd|password)(?-u:[ \t])+["'`]?(?P<secret>[^\t\n\x0B\f\r "'`,;$<>{}()\[\]%-][^\t\n\x0B\f\r "'`,;<>{}()\[\]]{7,})(?:["'`\t\n\x0B\f\r ,;<]|$)"#,
        Some(3.0),
    ),
    // The same flag with a quoted value that starts with `-` (`--password '-x7Q…'`):
    // quoted, a leading dash is part of the value, where unquoted it is the next option
    // (`--password --verbose`). A row of its own because a pattern has one `secret`
    // group and the regex has no look-behind: the dash rule depends on the quote before
    // the group. A second dash (`'--no-prompt'`) is an option quoted. Same keywords, so
    // a text pays one more anchored search per flag hit, which the bytes past the blanks
    // (a quote, then `-`) end.
    row(
        "password-flag-quoted",
        &["-password", "-Password", "-PASSWORD", "-passwd", "-PASSWD"],
        r#"-(?i-u:passwd|password)(?-u:[ \t])+["'`](?P<secret>-[^\t\n\x0B\f\r "'`,;$<>{}()\[\]%-][^\t\n\x0B\f\r "'`,;<>{}()\[\]]{6,})(?:["'`\t\n\x0B\f\r ,;<]|$)"#,
        Some(3.0),
    ),
    // Two label shapes: an assignment (`password = …`, `"password": "…"`) and an XML
    // element's text (`<password>…</password>`).
    row_at(
        "generic-password",
        PASSWORD_KW,
        (1, 1),
        concat!(
            r"(?i-u:passwd|password)(?:",
            generic_assign!(),
            r#"|>)(?P<secret>[^\t\n\x0B\f\r "'`,;$<>{}()\[\]%][^\t\n\x0B\f\r "'`,;<>{}()\[\]]{7,})(?:["'`\t\n\x0B\f\r ,;<]|$)"#
        ),
        Some(3.0),
    ),
    row_at(
        "generic-secret",
        SECRET_KW,
        (1, 1),
        concat!(
            r"(?i-u:secret)",
            generic_assign!(),
            r"(?P<secret>[A-Za-z0-9_+/=.~-]{16,})(?:[^A-Za-z0-9_+/=.~-]|$)"
        ),
        GENERIC,
    ),
    row_at(
        "generic-api-key",
        API_KEY_KW,
        (1, 1),
        concat!(
            r"(?i-u:api[_-]?key)",
            generic_assign!(),
            r"(?P<secret>[A-Za-z0-9_+/=.~-]{16,})(?:[^A-Za-z0-9_+/=.~-]|$)"
        ),
        GENERIC,
    ),
    // A quoted value of a key name (`signing_key = "…"`, `ENCRYPTION_KEY: '…'`) that
    // holds punctuation: the shape of generated keys (Django's `SECRET_KEY`, Rails'
    // `secret_key_base` salts, HMAC keys), which the alphanumeric generic rows leave out.
    // The value must hold one of `!#$%^*()+{}[]|;<>,~@`, which paths, URLs, UUIDs, hex
    // ids and `cache_key = "user:42"` do not, and be random (entropy 4.0 needs 17
    // distinct bytes). Not a `generic-` row: the required character makes its value a DFA
    // walk, not a run. The names are listed (`secret_key`, `signing_key`, `hmac_key`, …)
    // rather than any `_key`: a `_key` keyword made every `api_key:` of a repeated-label
    // text a second hit, and that text ran at a quarter of its speed.
    row_at(
        "punctuated-secret-key",
        &[
            "ecret_key",
            "ECRET_KEY",
            "ecret-key",
            "ECRET-KEY",
            "igning_key",
            "IGNING_KEY",
            "igning-key",
            "IGNING-KEY",
            "ncryption_key",
            "NCRYPTION_KEY",
            "ncryption-key",
            "NCRYPTION-KEY",
            "aster_key",
            "ASTER_KEY",
            "aster-key",
            "ASTER-KEY",
            "mac_key",
            "MAC_KEY",
            "mac-key",
            "MAC-KEY",
            "ookie_key",
            "OOKIE_KEY",
            "ookie-key",
            "OOKIE-KEY",
            "ession_key",
            "ESSION_KEY",
            "ession-key",
            "ESSION-KEY",
            "wt_key",
            "WT_KEY",
            "wt-key",
            "WT-KEY",
            "pp_key",
            "PP_KEY",
            "pp-key",
            "PP-KEY",
            "rypt_key",
            "RYPT_KEY",
            "rypt-key",
            "RYPT-KEY",
            "ipher_key",
            "IPHER_KEY",
            "ipher-key",
            "IPHER-KEY",
        ],
        (1, 1),
        concat!(
            r#"(?i-u:secret|signing|encryption|master|hmac|cookie|session|jwt|app|crypt|cipher)[_-](?i-u:key)["'`]?(?-u:\s){0,4}(?::=|=>|:|=)(?-u:\s){0,4}["'`]"#,
            r#"(?P<secret>[!-~&&[^"'`\\]]{0,127}[!#$%^*()+{}\[\]|;<>,~@][!-~&&[^"'`\\]]{0,127})["'`]"#
        ),
        Some(4.0),
    ),
    row_at(
        "generic-token",
        TOKEN_KW,
        (1, 1),
        concat!(
            r"(?i-u:token)",
            generic_assign!(),
            r"(?P<secret>[A-Za-z0-9_+/=.~-]{16,})(?:[^A-Za-z0-9_+/=.~-]|$)"
        ),
        GENERIC,
    ),
];

/// How `\b` in the table is written in a spec: an ASCII word boundary.
const ASCII_WORD_BOUNDARY: &str = r"(?-u:\b)";

/// The built-in detectors as specs, in table order.
pub fn builtin_specs() -> Vec<DetectorSpec> {
    BUILTINS
        .iter()
        .map(|b| DetectorSpec {
            name: b.name.to_string(),
            regex: b.regex.replace(r"\b", ASCII_WORD_BOUNDARY),
            entropy_threshold: b.entropy,
            origin: "builtin".to_string(),
            keywords: b.keywords.iter().map(|k| k.to_string()).collect(),
            keyword_offset: b.offset.0..=b.offset.1,
        })
        .collect()
}

/// Whether `secrets.disable: [disabled]` turns the built-in `name` off: the detector of
/// that name and its variants, the rows named after it with a suffix
/// (`password-flag-quoted`, `private-key-body`): a variant finds the same secret in
/// another shape, so a user who lifts the detector for a false positive would otherwise
/// meet the same finding under a name they did not know to lift.
pub fn lifts(disabled: &str, name: &str) -> bool {
    name.strip_prefix(disabled)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
}

/// No built-in row matches fewer bytes (`url-basic-auth`, `a://b:c@d`). Built-ins are
/// not parsed until their keyword is found, so the bound that lets short texts skip the
/// search is kept here; a test checks it against every row's parsed regex.
pub(super) const MIN_MATCH_LEN: usize = 7;

/// Whether `spec` is a built-in as [`builtin_specs`] makes it: its name and regex are
/// exactly a table row's (entropy and keywords do not matter to whether it compiles).
pub(super) fn is_builtin(spec: &DetectorSpec) -> bool {
    spec.origin == "builtin"
        && BUILTINS
            .iter()
            .any(|b| b.name == spec.name && same_after_rewrite(b.regex, &spec.regex))
}

/// Whether `spec_regex` is `table_regex` with every `\b` rewritten, without allocating.
fn same_after_rewrite(table_regex: &str, spec_regex: &str) -> bool {
    let mut rest = spec_regex;
    for (i, piece) in table_regex.split(r"\b").enumerate() {
        if i > 0 {
            let Some(r) = rest.strip_prefix(ASCII_WORD_BOUNDARY) else {
                return false;
            };
            rest = r;
        }
        let Some(r) = rest.strip_prefix(piece) else {
            return false;
        };
        rest = r;
    }
    rest.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_spec_is_recognised_and_a_changed_one_is_not() {
        for spec in builtin_specs() {
            assert!(is_builtin(&spec), "{}", spec.name);
            let mut changed = spec.clone();
            changed.regex.push('x');
            assert!(!is_builtin(&changed), "{}", spec.name);
            let mut user = spec.clone();
            user.origin = "policy.yaml".into();
            assert!(!is_builtin(&user), "{}", spec.name);
        }
        let mut spec = builtin_specs().remove(0);
        spec.name = "renamed".into();
        assert!(!is_builtin(&spec));
    }

    /// The families `secrets.disable` lifts together, pinned: a new row named after
    /// another one joins its family, which must be a decision, not an accident of naming.
    #[test]
    fn a_detector_lifts_exactly_its_named_variants() {
        let names: Vec<String> = builtin_specs().into_iter().map(|s| s.name).collect();
        let mut families: Vec<(&str, &str)> = Vec::new();
        for d in &names {
            for n in &names {
                if d != n && lifts(d, n) {
                    families.push((d, n));
                }
            }
        }
        families.sort_unstable();
        assert_eq!(
            families,
            [
                ("aws-secret-access-key", "aws-secret-access-key-unlabelled"),
                ("heroku-api-key", "heroku-api-key-labelled"),
                ("netlify-token", "netlify-token-labelled"),
                ("password-flag", "password-flag-quoted"),
                ("private-key", "private-key-body"),
            ]
        );
        assert!(lifts("password-flag", "password-flag"));
        assert!(!lifts("password-flag-quoted", "password-flag"));
        assert!(!lifts("password", "passwordx"));
    }

    #[test]
    fn min_match_len_is_the_shortest_match_of_any_row() {
        let shortest = builtin_specs()
            .iter()
            .map(|s| {
                let hir = super::super::parse(&s.regex).unwrap();
                hir.properties().minimum_len().unwrap()
            })
            .min();
        assert_eq!(shortest, Some(MIN_MATCH_LEN));
    }
}
