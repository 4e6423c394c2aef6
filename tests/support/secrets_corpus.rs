//! Generated test corpora for the secret detector: fake credentials in every built-in
//! format (built at run time from a seeded RNG, never real ones, and no
//! secret-looking literal in the repository) and ordinary text that must not be
//! flagged.
#![allow(dead_code)]

/// xorshift64*: tiny, seeded, good enough for test data.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn range(&mut self, lo: usize, hi_inclusive: usize) -> usize {
        lo + self.below(hi_inclusive - lo + 1)
    }
    pub fn pick<'a, T: ?Sized>(&mut self, items: &[&'a T]) -> &'a T {
        items[self.below(items.len())]
    }
    pub fn chars(&mut self, alphabet: &str, n: usize) -> String {
        let a = alphabet.as_bytes();
        (0..n).map(|_| a[self.below(a.len())] as char).collect()
    }
    pub fn chars_len(&mut self, alphabet: &str, lo: usize, hi_inclusive: usize) -> String {
        let n = self.range(lo, hi_inclusive);
        self.chars(alphabet, n)
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
    pub fn alnum(&mut self, n: usize) -> String {
        self.chars(ALNUM, n)
    }
    pub fn hex(&mut self, n: usize) -> String {
        self.chars(HEX, n)
    }
}

pub const UPPER: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
pub const LOWER: &str = "abcdefghijklmnopqrstuvwxyz";
pub const DIGITS: &str = "0123456789";
pub const HEX: &str = "0123456789abcdef";
pub const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
pub const URLSAFE: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
pub const B64: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const LOWERNUM: &str = "abcdefghijklmnopqrstuvwxyz0123456789";
pub const B32: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
pub const BECH32: &str = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L";

pub fn base64(data: &[u8], url: bool) -> String {
    let table = if url { URLSAFE } else { B64 }.as_bytes();
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(table[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else if !url {
                out.push('=');
            }
        }
    }
    out
}

/// A fake credential: `text` is what appears in a file or response (the token, or
/// `LABEL=value` for labelled formats); `secret` is the part that must be redacted.
#[derive(Debug, Clone)]
pub struct Fake {
    pub text: String,
    pub secret: String,
}

fn token(t: String) -> Fake {
    Fake {
        secret: t.clone(),
        text: t,
    }
}

fn labelled(label: &str, sep: &str, value: String) -> Fake {
    Fake {
        text: format!("{label}{sep}{value}"),
        secret: value,
    }
}

fn pem_body(rng: &mut Rng, lines: usize, eol: &str) -> String {
    let mut body = String::new();
    for _ in 0..lines {
        body.push_str(&base64(&rng.bytes(48), false));
        body.push_str(eol);
    }
    let tail = rng.range(3, 40);
    body.push_str(&base64(&rng.bytes(tail), false));
    body.push_str(eol);
    body
}

fn password(rng: &mut Rng) -> String {
    let n = rng.range(12, 28);
    rng.chars(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!*_-~.",
        n,
    )
}

fn sep(rng: &mut Rng) -> &'static str {
    rng.pick(&["=", ": ", " = ", "=\"", "\": \""])
}

/// A generated key's alphabet, mostly punctuation (Django's `SECRET_KEY` shape).
const KEY_PUNCT: &str = "abcdefghijklmnopqrstuvwxyz0123456789!@#$%^&*(-_=+)[]{};:,.<>?~|";

/// Provider tokens that are a published prefix and a random body: (format, prefix,
/// alphabet, length).
const PREFIXED: &[(&str, &str, &str, usize)] = &[
    ("gitlab-ci-build-token", "glcbt-", URLSAFE, 26),
    ("gitlab-agent-token", "glagent-", URLSAFE, 50),
    ("gitlab-oauth-app-secret", "gloas-", HEX, 64),
    ("gitlab-feature-flag-token", "glffct-", URLSAFE, 20),
    ("gitlab-scim-token", "glsoat-", URLSAFE, 20),
    ("gitlab-incoming-mail-token", "glimt-", URLSAFE, 25),
    ("databricks-token", "dapi", HEX, 32),
    ("grafana-cloud-token", "glc_", B64, 80),
    ("planetscale-token", "pscale_tkn_", URLSAFE, 43),
    ("planetscale-password", "pscale_pw_", URLSAFE, 43),
    ("planetscale-oauth-token", "pscale_oauth_", URLSAFE, 43),
    ("supabase-access-token", "sbp_", HEX, 40),
    ("supabase-secret-key", "sb_secret_", URLSAFE, 31),
    ("flyio-token", "fo1_", URLSAFE, 43),
    ("pulumi-access-token", "pul-", HEX, 40),
    ("figma-pat", "figd_", URLSAFE, 40),
    ("frameio-token", "fio-u-", URLSAFE, 64),
    ("contentful-pat", "CFPAT-", URLSAFE, 43),
    ("typeform-token", "tfp_", URLSAFE, 59),
    ("adafruit-io-key", "aio_", ALNUM, 28),
    ("prefect-api-key", "pnu_", ALNUM, 36),
    ("readme-api-key", "rdme_", LOWERNUM, 70),
    ("scalingo-token", "tk-us-", URLSAFE, 48),
    ("sourcegraph-token", "sgp_", HEX, 40),
    ("infracost-api-key", "ico-", ALNUM, 32),
    ("clojars-token", "CLOJARS_", HEX, 60),
    ("alibaba-access-key-id", "LTAI", ALNUM, 20),
    ("tencent-secret-id", "AKID", ALNUM, 32),
    ("openrouter-api-key", "sk-or-v1-", HEX, 64),
    ("buildkite-token", "bkua_", HEX, 40),
    ("jfrog-api-key", "AKCp", ALNUM, 69),
    ("crates-io-token", "cio", ALNUM, 32),
    ("honeycomb-ingest-key", "hcaik_", ALNUM, 58),
    ("posthog-personal-api-key", "phx_", ALNUM, 43),
    ("render-api-key", "rnd_", ALNUM, 32),
    ("deno-deploy-token", "ddp_", ALNUM, 36),
    ("neon-api-key", "napi_", ALNUM, 64),
    ("intercom-access-token", "dG9rOi", B64, 54),
];

/// Every format the generator knows, by built-in detector name.
pub const FORMATS: &[&str] = &[
    "private-key",
    "pgp-private-key-block",
    "putty-private-key",
    "private-key-body",
    "gcp-service-account-key",
    "gitlab-ci-build-token",
    "gitlab-agent-token",
    "gitlab-oauth-app-secret",
    "gitlab-feature-flag-token",
    "gitlab-scim-token",
    "gitlab-incoming-mail-token",
    "databricks-token",
    "grafana-cloud-token",
    "grafana-service-account-token",
    "planetscale-token",
    "planetscale-password",
    "planetscale-oauth-token",
    "supabase-access-token",
    "supabase-secret-key",
    "flyio-token",
    "pulumi-access-token",
    "mapbox-secret-token",
    "figma-pat",
    "frameio-token",
    "dynatrace-token",
    "contentful-pat",
    "typeform-token",
    "brevo-api-key",
    "adafruit-io-key",
    "prefect-api-key",
    "readme-api-key",
    "scalingo-token",
    "sourcegraph-token",
    "tailscale-key",
    "infracost-api-key",
    "clojars-token",
    "alibaba-access-key-id",
    "tencent-secret-id",
    "openrouter-api-key",
    "langsmith-api-key",
    "pinecone-api-key",
    "circleci-pat",
    "buildkite-token",
    "jfrog-api-key",
    "crates-io-token",
    "honeycomb-ingest-key",
    "posthog-personal-api-key",
    "render-api-key",
    "deno-deploy-token",
    "neon-api-key",
    "shippo-api-token",
    "easypost-api-key",
    "flutterwave-secret-key",
    "razorpay-key",
    "duffel-api-token",
    "sonarqube-token",
    "firebase-fcm-server-key",
    "intercom-access-token",
    "age-secret-key",
    "aws-secret-access-key-unlabelled",
    "aws-access-key-id",
    "aws-secret-access-key",
    "gcp-api-key",
    "gcp-oauth-client-secret",
    "google-oauth-access-token",
    "google-oauth-refresh-token",
    "azure-storage-connection-string",
    "azure-storage-account-key",
    "azure-service-bus-key",
    "azure-sas-token",
    "azure-client-secret",
    "github-token",
    "github-oauth-token",
    "github-user-token",
    "github-app-token",
    "github-refresh-token",
    "github-fine-grained-pat",
    "gitlab-pat",
    "gitlab-runner-token",
    "gitlab-runner-registration-token",
    "gitlab-deploy-token",
    "gitlab-pipeline-trigger-token",
    "atlassian-api-token",
    "bitbucket-access-token",
    "bitbucket-app-password",
    "slack-bot-token",
    "slack-user-token",
    "slack-config-token",
    "slack-token",
    "slack-app-token",
    "slack-webhook-url",
    "discord-webhook-url",
    "discord-bot-token",
    "telegram-bot-token",
    "twilio-api-key",
    "twilio-auth-token",
    "sendgrid-api-key",
    "mailgun-api-key",
    "mailchimp-api-key",
    "stripe-secret-key",
    "stripe-restricted-key",
    "stripe-webhook-secret",
    "square-access-token",
    "square-oauth-secret",
    "shopify-access-token",
    "shopify-shared-secret",
    "paypal-braintree-access-token",
    "anthropic-api-key",
    "anthropic-admin-key",
    "openai-project-key",
    "openai-service-account-key",
    "openai-admin-key",
    "openai-api-key",
    "huggingface-token",
    "cohere-api-key",
    "replicate-api-token",
    "groq-api-key",
    "perplexity-api-key",
    "xai-api-key",
    "npm-token",
    "pypi-token",
    "rubygems-api-key",
    "nuget-api-key",
    "docker-hub-token",
    "heroku-api-key",
    "heroku-api-key-labelled",
    "digitalocean-token",
    "netlify-token",
    "netlify-token-labelled",
    "vercel-token",
    "cloudflare-api-token",
    "cloudflare-global-api-key",
    "cloudflare-origin-ca-key",
    "hashicorp-vault-token",
    "hashicorp-vault-recovery-token",
    "terraform-cloud-token",
    "doppler-token",
    "onepassword-service-account-token",
    "datadog-api-key",
    "newrelic-user-api-key",
    "newrelic-insert-key",
    "newrelic-browser-key",
    "newrelic-license-key",
    "sentry-auth-token",
    "sentry-dsn",
    "linear-api-key",
    "notion-integration-token",
    "notion-api-token",
    "postman-api-key",
    "jwt",
    "postgres-url-password",
    "mysql-url-password",
    "mongodb-url-password",
    "redis-url-password",
    "amqp-url-password",
    "url-basic-auth",
    "http-authorization-header",
    "http-bearer-token",
    "password-flag",
    "password-flag-quoted",
    "generic-password",
    "generic-secret",
    "generic-api-key",
    "punctuated-secret-key",
    "generic-token",
];

/// A fake credential of format `name` (a built-in detector name).
pub fn fake(name: &str, rng: &mut Rng) -> Fake {
    let r = rng;
    match name {
        "private-key-body" => {
            // A body's fixed DER (or OpenSSH) prefix, random bytes after it, base64,
            // wrapped or not: what `tail`, a secret manager or a config value holds.
            let prefix = r.pick(&[
                "6f70656e7373682d6b65792d763100000000046e6f6e65",
                "308204a40201000282010100",
                "308209290201000282020100",
                "308204bd020100300d06092a864886f70d010101050004",
                "308187020100301306072a8648ce3d020106082a8648ce3d030107046d306b0201010420",
                "3081b6020100301006072a8648ce3d020106052b81040022",
                "30770201010420",
                "3081a40201010430",
                "302e020100300506032b657004220420",
            ]);
            let mut der: Vec<u8> = (0..prefix.len() / 2)
                .map(|i| u8::from_str_radix(&prefix[i * 2..i * 2 + 2], 16).unwrap())
                .collect();
            let n = r.range(40, 1200);
            der.extend(r.bytes(n));
            let flat = base64(&der, false);
            let width = *r.pick(&[&0usize, &64, &70, &76]);
            let body = if width == 0 {
                flat
            } else {
                let eol = r.pick(&["\n", "\r\n", "\\n"]);
                flat.as_bytes()
                    .chunks(width)
                    .map(|c| std::str::from_utf8(c).unwrap())
                    .collect::<Vec<_>>()
                    .join(eol)
            };
            token(body)
        }
        "private-key" => {
            let kind = r.pick(&["RSA ", "EC ", "DSA ", "OPENSSH ", "ENCRYPTED ", ""]);
            let eol = r.pick(&["\n", "\r\n", "\\n"]);
            let headers = if kind == "RSA " && r.below(2) == 0 {
                format!(
                    "Proc-Type: 4,ENCRYPTED{eol}DEK-Info: AES-128-CBC,{}{eol}{eol}",
                    r.hex(32).to_uppercase()
                )
            } else {
                String::new()
            };
            let n = r.range(4, 30);
            token(format!(
                "-----BEGIN {kind}PRIVATE KEY-----{eol}{headers}{}-----END {kind}PRIVATE KEY-----",
                pem_body(r, n, eol)
            ))
        }
        "pgp-private-key-block" => {
            let n = r.range(10, 60);
            let body = pem_body(r, n, "\n");
            let crc = base64(&r.bytes(3), false);
            token(format!(
                "-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\n\n{body}={crc}\n-----END PGP PRIVATE KEY BLOCK-----"
            ))
        }
        "putty-private-key" => {
            let public = pem_body(r, 5, "\n");
            let private = pem_body(r, 12, "\n");
            token(format!(
                "PuTTY-User-Key-File-{}: ssh-rsa\nEncryption: none\nComment: rsa-key-2024\nPublic-Lines: 6\n{public}Private-Lines: 13\n{private}Private-MAC: {}",
                r.range(2, 3),
                r.hex(40)
            ))
        }
        "gcp-service-account-key" => {
            let n = r.range(10, 26);
            let value = format!(
                "-----BEGIN PRIVATE KEY-----\\n{}-----END PRIVATE KEY-----\\n",
                pem_body(r, n, "\\n")
            );
            Fake {
                text: format!(
                    "{{\n  \"type\": \"service_account\",\n  \"project_id\": \"demo-{}\",\n  \"private_key_id\": \"{}\",\n  \"private_key\": \"{value}\",\n  \"client_email\": \"svc@demo.iam.gserviceaccount.com\"\n}}",
                    r.range(100, 999),
                    r.hex(40)
                ),
                secret: value,
            }
        }
        "age-secret-key" => token(format!("AGE-SECRET-KEY-1{}", r.chars(BECH32, 58))),
        "aws-access-key-id" => {
            let prefix = r.pick(&["AKIA", "ASIA", "ABIA", "ACCA"]);
            let id = r.chars(B32, 16);
            if r.below(3) == 0 {
                // In groups of four, as read out or pasted from a form.
                let sep = r.pick(&["-", " ", "_", "."]);
                let groups: Vec<&str> = (0..4).map(|i| &id[i * 4..i * 4 + 4]).collect();
                token(format!("{prefix}{sep}{}", groups.join(sep)))
            } else {
                token(format!("{prefix}{id}"))
            }
        }
        "aws-secret-access-key-unlabelled" => {
            let id = format!("{}{}", r.pick(&["AKIA", "ASIA"]), r.chars(B32, 16));
            let sep = r.pick(&[",", " ", ":", "\n", " | ", "\t", "\",\""]);
            let secret = r.chars(B64, 40);
            Fake {
                text: format!("{id}{sep}{secret}"),
                secret,
            }
        }
        "aws-secret-access-key" => {
            let label = r.pick(&[
                "aws_secret_access_key",
                "AWS_SECRET_ACCESS_KEY",
                "\"SecretAccessKey",
                "secretAccessKey",
                "aws_secret_key",
            ]);
            let s = if label.starts_with('"') {
                "\": \""
            } else {
                " = "
            };
            labelled(label, s, r.chars(B64, 40))
        }
        "gcp-api-key" => token(format!("AIza{}", r.chars(URLSAFE, 35))),
        "gcp-oauth-client-secret" => token(format!("GOCSPX-{}", r.chars(URLSAFE, 28))),
        "google-oauth-access-token" => {
            let n = r.range(60, 160);
            token(format!("ya29.{}", r.chars(URLSAFE, n)))
        }
        "google-oauth-refresh-token" => {
            let n = r.range(60, 100);
            token(format!("1//0{}", r.chars(URLSAFE, n)))
        }
        "azure-storage-connection-string" => {
            let key = format!("{}==", r.chars(B64, 86));
            Fake {
                text: format!(
                    "DefaultEndpointsProtocol=https;AccountName=acct{};AccountKey={key};EndpointSuffix=core.windows.net",
                    r.range(1, 99)
                ),
                secret: key,
            }
        }
        "azure-storage-account-key" => {
            let key = format!("{}==", r.chars(B64, 86));
            Fake {
                text: format!("AccountName=store{};AccountKey={key}", r.range(1, 99)),
                secret: key,
            }
        }
        "azure-service-bus-key" => {
            let key = format!("{}=", r.chars(B64, 43));
            Fake {
                text: format!(
                    "Endpoint=sb://ns{}.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={key}",
                    r.range(1, 99)
                ),
                secret: key,
            }
        }
        "azure-sas-token" => {
            let mut sig = String::new();
            for _ in 0..43 {
                match r.below(20) {
                    0 => sig.push_str("%2B"),
                    1 => sig.push_str("%2F"),
                    _ => sig.push_str(&r.alnum(1)),
                }
            }
            sig.push_str("%3D");
            Fake {
                text: format!(
                    "https://acct.blob.core.windows.net/c/blob.txt?sv=2022-11-02&ss=b&srt=o&sp=r&se=2030-01-01T00:00:00Z&spr=https&sig={sig}"
                ),
                secret: sig,
            }
        }
        "azure-client-secret" => {
            let value = format!(
                "{}{}Q~{}",
                r.chars(
                    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_~.",
                    3
                ),
                r.below(10),
                r.chars(
                    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_~.-",
                    34
                )
            );
            let label = r.pick(&["AZURE_CLIENT_SECRET", "client_secret", "\"clientSecret"]);
            let s = if label.starts_with('"') {
                "\": \""
            } else {
                "="
            };
            labelled(label, s, value)
        }
        "github-token" => token(format!("ghp_{}", r.alnum(36))),
        "github-oauth-token" => token(format!("gho_{}", r.alnum(36))),
        "github-user-token" => token(format!("ghu_{}", r.alnum(36))),
        "github-app-token" => token(format!("ghs_{}", r.alnum(36))),
        "github-refresh-token" => {
            let n = r.range(36, 76);
            token(format!("ghr_{}", r.alnum(n)))
        }
        "github-fine-grained-pat" => token(format!("github_pat_{}_{}", r.alnum(22), r.alnum(59))),
        "gitlab-pat" => token(format!("glpat-{}", r.chars(URLSAFE, 20))),
        "gitlab-runner-token" => token(format!("glrt-{}", r.chars(URLSAFE, 20))),
        "gitlab-runner-registration-token" => token(format!("GR1348941{}", r.chars(URLSAFE, 20))),
        "gitlab-deploy-token" => token(format!("gldt-{}", r.chars(URLSAFE, 20))),
        "gitlab-pipeline-trigger-token" => token(format!("glptt-{}", r.hex(40))),
        "atlassian-api-token" => token(format!(
            "ATATT3xFfGF0{}={}",
            r.chars(URLSAFE, 170),
            r.hex(8).to_uppercase()
        )),
        "bitbucket-access-token" => token(format!(
            "ATCTT3xFfGN0{}={}",
            r.chars(URLSAFE, 170),
            r.hex(8).to_uppercase()
        )),
        "bitbucket-app-password" => {
            token(format!("ATBB{}{}", r.alnum(32), r.hex(8).to_uppercase()))
        }
        "slack-bot-token" => {
            let (a, b) = (r.range(10, 13), r.range(10, 13));
            token(format!(
                "xoxb-{}-{}-{}",
                r.chars(DIGITS, a),
                r.chars(DIGITS, b),
                r.alnum(24)
            ))
        }
        "slack-user-token" => token(format!(
            "xoxp-{}-{}-{}-{}",
            r.chars(DIGITS, 12),
            r.chars(DIGITS, 12),
            r.chars(DIGITS, 13),
            r.hex(32)
        )),
        "slack-config-token" => {
            let kind = r.pick(&["xoxe.xoxp", "xoxe.xoxb", "xoxe"]);
            let n = r.range(146, 166);
            token(format!("{kind}-1-{}", r.alnum(n)))
        }
        "slack-token" => {
            let kind = r.pick(&["xoxa", "xoxo", "xoxs", "xoxr"]);
            token(format!(
                "{kind}-{}-{}-{}",
                r.chars(DIGITS, 11),
                r.chars(DIGITS, 12),
                r.alnum(24)
            ))
        }
        "slack-app-token" => token(format!(
            "xapp-1-A{}-{}-{}",
            r.chars(&format!("{UPPER}{DIGITS}"), 10),
            r.chars(DIGITS, 13),
            r.hex(64)
        )),
        "slack-webhook-url" => {
            let path = format!(
                "T{}/B{}/{}",
                r.chars(&format!("{UPPER}{DIGITS}"), 10),
                r.chars(&format!("{UPPER}{DIGITS}"), 10),
                r.alnum(24)
            );
            Fake {
                text: format!("https://hooks.slack.com/services/{path}"),
                secret: path,
            }
        }
        "discord-webhook-url" => {
            let secret = r.chars(URLSAFE, 68);
            Fake {
                text: format!(
                    "https://discord.com/api/webhooks/{}/{secret}",
                    r.chars(DIGITS, 18)
                ),
                secret,
            }
        }
        "discord-bot-token" => {
            let id = base64(r.chars(DIGITS, 18).as_bytes(), true);
            let first = format!("{}{}", r.pick(&["M", "N", "O"]), &id[1..24]);
            let value = format!("{first}.{}.{}", r.chars(URLSAFE, 6), r.chars(URLSAFE, 38));
            let label = r.pick(&["DISCORD_BOT_TOKEN", "discord_token", "DISCORD_TOKEN"]);
            labelled(label, "=", value)
        }
        "telegram-bot-token" => {
            let n = r.range(8, 10);
            token(format!("{}:AA{}", r.chars(DIGITS, n), r.chars(URLSAFE, 33)))
        }
        "twilio-api-key" => labelled("TWILIO_API_KEY", "=", format!("SK{}", r.hex(32))),
        "twilio-auth-token" => labelled(
            r.pick(&["TWILIO_AUTH_TOKEN", "twilioAuthToken"]),
            "=",
            r.hex(32),
        ),
        "sendgrid-api-key" => token(format!(
            "SG.{}.{}",
            r.chars(URLSAFE, 22),
            r.chars(URLSAFE, 43)
        )),
        "mailgun-api-key" => token(format!("key-{}", r.hex(32))),
        "mailchimp-api-key" => token(format!("{}-us{}", r.hex(32), r.range(1, 21))),
        "stripe-secret-key" => {
            let mode = r.pick(&["live", "test"]);
            let n = r.range(24, 99);
            token(format!("sk_{mode}_{}", r.alnum(n)))
        }
        "stripe-restricted-key" => {
            let mode = r.pick(&["live", "test"]);
            let n = r.range(24, 99);
            token(format!("rk_{mode}_{}", r.alnum(n)))
        }
        "stripe-webhook-secret" => token(format!("whsec_{}", r.alnum(32))),
        "square-access-token" => {
            if r.below(2) == 0 {
                token(format!("sq0atp-{}", r.chars(URLSAFE, 22)))
            } else {
                token(format!("EAAA{}", r.chars(URLSAFE, 60)))
            }
        }
        "square-oauth-secret" => token(format!("sq0csp-{}", r.chars(URLSAFE, 43))),
        "shopify-access-token" => {
            let kind = r.pick(&["shpat", "shpca", "shppa"]);
            token(format!("{kind}_{}", r.hex(32)))
        }
        "shopify-shared-secret" => token(format!("shpss_{}", r.hex(32))),
        "paypal-braintree-access-token" => {
            let env = r.pick(&["production", "sandbox"]);
            token(format!(
                "access_token${env}${}${}",
                r.chars(&format!("{LOWER}{DIGITS}"), 16),
                r.hex(32)
            ))
        }
        "anthropic-api-key" => token(format!("sk-ant-api03-{}AA", r.chars(URLSAFE, 93))),
        "anthropic-admin-key" => token(format!("sk-ant-admin01-{}AA", r.chars(URLSAFE, 93))),
        "openai-project-key" => {
            let n = r.range(60, 150);
            token(format!("sk-proj-{}", r.chars(URLSAFE, n)))
        }
        "openai-service-account-key" => {
            let n = r.range(60, 150);
            token(format!("sk-svcacct-{}", r.chars(URLSAFE, n)))
        }
        "openai-admin-key" => {
            let n = r.range(60, 150);
            token(format!("sk-admin-{}", r.chars(URLSAFE, n)))
        }
        "openai-api-key" => token(format!("sk-{}T3BlbkFJ{}", r.alnum(20), r.alnum(20))),
        "huggingface-token" => token(format!("hf_{}", r.chars(&format!("{UPPER}{LOWER}"), 34))),
        "cohere-api-key" => labelled(
            r.pick(&["COHERE_API_KEY", "cohere_key", "\"cohereApiKey"]),
            "=",
            r.alnum(40),
        ),
        "replicate-api-token" => token(format!("r8_{}", r.alnum(37))),
        "groq-api-key" => token(format!("gsk_{}", r.alnum(52))),
        "perplexity-api-key" => token(format!("pplx-{}", r.alnum(48))),
        "xai-api-key" => token(format!("xai-{}", r.alnum(80))),
        "npm-token" => token(format!("npm_{}", r.alnum(36))),
        "pypi-token" => {
            let n = r.range(70, 160);
            token(format!("pypi-AgEIcHlwaS5vcmc{}", r.chars(URLSAFE, n)))
        }
        "rubygems-api-key" => token(format!("rubygems_{}", r.hex(48))),
        "nuget-api-key" => token(format!("oy2{}", r.chars(&format!("{LOWER}{DIGITS}"), 43))),
        "docker-hub-token" => {
            let kind = r.pick(&["pat", "oat"]);
            token(format!("dckr_{kind}_{}", r.chars(URLSAFE, 27)))
        }
        "heroku-api-key" => token(format!("HRKU-{}", r.chars(URLSAFE, 60))),
        "heroku-api-key-labelled" => labelled("HEROKU_API_KEY", "=", uuid(r)),
        "digitalocean-token" => {
            let kind = r.pick(&["dop", "doo", "dor"]);
            token(format!("{kind}_v1_{}", r.hex(64)))
        }
        "netlify-token" => token(format!("nfp_{}", r.alnum(36))),
        "netlify-token-labelled" => labelled("NETLIFY_AUTH_TOKEN", "=", r.chars(URLSAFE, 43)),
        "vercel-token" => labelled(r.pick(&["VERCEL_TOKEN", "vercel_token"]), "=", r.alnum(24)),
        "cloudflare-api-token" => labelled("CLOUDFLARE_API_TOKEN", "=", r.chars(URLSAFE, 40)),
        "cloudflare-global-api-key" => labelled("CLOUDFLARE_API_KEY", "=", r.hex(37)),
        "cloudflare-origin-ca-key" => token(format!("v1.0-{}-{}", r.hex(24), r.hex(146))),
        "hashicorp-vault-token" => {
            let kind = r.pick(&["hvs", "hvb"]);
            let n = r.range(90, 140);
            token(format!("{kind}.{}", r.chars(URLSAFE, n)))
        }
        "hashicorp-vault-recovery-token" => {
            let n = r.range(90, 120);
            token(format!("hvr.{}", r.chars(URLSAFE, n)))
        }
        "terraform-cloud-token" => {
            token(format!("{}.atlasv1.{}", r.alnum(14), r.chars(URLSAFE, 67)))
        }
        "doppler-token" => {
            let kind = r.pick(&["pt", "st", "sa", "ct"]);
            token(format!("dp.{kind}.{}", r.alnum(43)))
        }
        "onepassword-service-account-token" => {
            let json = format!(
                "{{\"signInAddress\":\"my.1password.com\",\"userAuth\":{{\"method\":\"SRPg-4096\",\"alg\":\"PBES2g-HS256\",\"iterations\":650000,\"salt\":\"{}\"}},\"email\":\"{}@1passwordserviceaccounts.com\",\"srpX\":\"{}\",\"muk\":{{\"alg\":\"A256GCM\",\"ext\":true,\"k\":\"{}\"}},\"secretKey\":\"A3-{}\",\"deviceUuid\":\"{}\"}}",
                r.alnum(22),
                r.chars(LOWER, 12),
                r.hex(64),
                r.alnum(43),
                r.chars(&format!("{UPPER}{DIGITS}"), 26),
                r.chars(&format!("{LOWER}{DIGITS}"), 26)
            );
            token(format!("ops_{}", base64(json.as_bytes(), true)))
        }
        "datadog-api-key" => {
            let n = if r.below(2) == 0 { 32 } else { 40 };
            labelled(
                r.pick(&["DATADOG_API_KEY", "datadog_app_key", "DATADOG_KEY"]),
                "=",
                r.hex(n),
            )
        }
        "newrelic-user-api-key" => {
            token(format!("NRAK-{}", r.chars(&format!("{UPPER}{DIGITS}"), 27)))
        }
        "newrelic-insert-key" => token(format!("NRII-{}", r.chars(URLSAFE, 32))),
        "newrelic-browser-key" => token(format!("NRJS-{}", r.hex(19))),
        "newrelic-license-key" => token(format!("{}NRAL", r.hex(36))),
        "sentry-auth-token" => {
            if r.below(2) == 0 {
                token(format!("sntryu_{}", r.hex(64)))
            } else {
                let n = r.range(80, 160);
                token(format!("sntrys_eyJ{}", r.chars(URLSAFE, n)))
            }
        }
        "sentry-dsn" => {
            let key = r.hex(32);
            Fake {
                text: format!(
                    "https://{key}@o{}.ingest.sentry.io/{}",
                    r.chars(DIGITS, 6),
                    r.chars(DIGITS, 7)
                ),
                secret: key,
            }
        }
        "linear-api-key" => token(format!("lin_api_{}", r.alnum(40))),
        "notion-integration-token" => token(format!("secret_{}", r.alnum(43))),
        "notion-api-token" => token(format!("ntn_{}{}", r.chars(DIGITS, 11), r.alnum(35))),
        "postman-api-key" => token(format!("PMAK-{}-{}", r.hex(24), r.hex(34))),
        "jwt" => {
            let header = r.pick(&[
                "{\"alg\":\"HS256\",\"typ\":\"JWT\"}",
                "{\"typ\":\"JWT\",\"alg\":\"RS256\"}",
                "{\"kid\":\"k1\",\"alg\":\"ES256\"}",
            ]);
            let payload = format!(
                "{{\"sub\":\"{}\",\"name\":\"{}\",\"iat\":{}}}",
                r.chars(DIGITS, 10),
                r.chars(LOWER, 8),
                r.chars(DIGITS, 10)
            );
            let n = r.range(32, 256);
            let sig = r.bytes(n);
            token(format!(
                "{}.{}.{}",
                base64(header.as_bytes(), true),
                base64(payload.as_bytes(), true),
                base64(&sig, true)
            ))
        }
        "postgres-url-password" => {
            let pw = password(r);
            let scheme = r.pick(&["postgres", "postgresql"]);
            Fake {
                text: format!("{scheme}://app_user:{pw}@db.internal:5432/app"),
                secret: pw,
            }
        }
        "mysql-url-password" => {
            let pw = password(r);
            Fake {
                text: format!("mysql://root:{pw}@127.0.0.1:3306/shop"),
                secret: pw,
            }
        }
        "mongodb-url-password" => {
            let pw = password(r);
            Fake {
                text: format!("mongodb+srv://admin:{pw}@cluster0.ab1cd.mongodb.net/test"),
                secret: pw,
            }
        }
        "redis-url-password" => {
            let pw = password(r);
            let user = r.pick(&["", "default"]);
            Fake {
                text: format!("rediss://{user}:{pw}@cache.example.net:6380/0"),
                secret: pw,
            }
        }
        "amqp-url-password" => {
            let pw = password(r);
            Fake {
                text: format!("amqps://guest:{pw}@mq.example.org:5671/vhost"),
                secret: pw,
            }
        }
        "url-basic-auth" => {
            let pw = password(r);
            let scheme = r.pick(&["https", "http", "ftp"]);
            Fake {
                text: format!("{scheme}://deploy:{pw}@files.example.com/releases/latest"),
                secret: pw,
            }
        }
        "http-authorization-header" => {
            let value = if r.below(2) == 0 {
                let creds = format!("admin:{}", password(r));
                format!("Basic {}", base64(creds.as_bytes(), false))
            } else {
                let n = r.range(24, 64);
                format!("Bearer {}", r.chars(URLSAFE, n))
            };
            let secret = value.split_once(' ').unwrap().1.to_string();
            Fake {
                text: format!("Authorization: {value}"),
                secret,
            }
        }
        "http-bearer-token" => {
            let n = r.range(24, 64);
            let t = r.chars(URLSAFE, n);
            Fake {
                text: format!("Bearer {t}"),
                secret: t,
            }
        }
        "generic-password" => {
            let label = r.pick(&[
                "password",
                "DB_PASSWORD",
                "\"password",
                "smtpPassword",
                "passwd",
                "<password>",
                "<Password>",
            ]);
            let value = password(r);
            if let Some(element) = label.strip_prefix('<') {
                return Fake {
                    text: format!("{label}{value}</{element}"),
                    secret: value,
                };
            }
            let s = if label.starts_with('"') {
                "\": \""
            } else {
                sep(r)
            };
            labelled(label, s, value)
        }
        "password-flag" => {
            let flag = r.pick(&[
                "--password",
                "--db-password",
                "-password",
                "--PASSWORD",
                "-passwd",
            ]);
            let s = r.pick(&[" ", "  ", " '", "\t"]);
            // A value starting with `-` is the next option to argparse, clap and most
            // parsers (`--password -q5B…` is refused or read as `-q`), and the detector
            // leaves it alone so that `-password -tls-skip-verify` is not a password.
            let mut value = password(r);
            while value.starts_with('-') {
                value = password(r);
            }
            labelled(flag, s, value)
        }
        "password-flag-quoted" => {
            // Quoted, a value may start with `-`: the quote says where it begins.
            let flag = r.pick(&["--password", "--db-password", "-password", "-passwd"]);
            let quote = r.pick(&["'", "\"", "`"]);
            // One dash: `'--no-prompt'` is an option quoted.
            let mut rest = password(r);
            while rest.starts_with('-') {
                rest = password(r);
            }
            let value = format!("-{rest}");
            Fake {
                text: format!("{flag} {quote}{value}{quote}"),
                secret: value,
            }
        }
        "generic-secret" => {
            let label = r.pick(&[
                "client_secret",
                "APP_SECRET",
                "\"secret",
                "webhookSecret",
                "JWT_SECRET",
            ]);
            let s = if label.starts_with('"') {
                "\": \""
            } else {
                sep(r)
            };
            let n = r.range(20, 64);
            labelled(label, s, r.chars(URLSAFE, n))
        }
        "generic-api-key" => {
            let label = r.pick(&["api_key", "API_KEY", "\"apiKey", "X-Api-Key", "apikey"]);
            let s = if label.starts_with('"') {
                "\": \""
            } else {
                sep(r)
            };
            let n = r.range(20, 64);
            labelled(label, s, r.alnum(n))
        }
        "punctuated-secret-key" => {
            let label = r.pick(&[
                "SECRET_KEY",
                "signing_key",
                "ENCRYPTION_KEY",
                "\"hmac_key",
                "master-key",
            ]);
            let (open, close) = if label.starts_with('"') {
                ("\": \"", "\"")
            } else {
                *r.pick(&[
                    &(" = '", "'"),
                    &("=\"", "\""),
                    &(": \"", "\""),
                    &(" => '", "'"),
                ])
            };
            let n = r.range(32, 60);
            let mut value = r.chars(KEY_PUNCT, n);
            value.push_str(r.pick(&["!", "#", "$", "%", "^", "*", "(", ")", "+", "@"]));
            Fake {
                text: format!("{label}{open}{value}{close}"),
                secret: value,
            }
        }
        "generic-token" => {
            let label = r.pick(&[
                "auth_token",
                "TOKEN",
                "\"access_token",
                "refreshToken",
                "api_token",
            ]);
            let s = if label.starts_with('"') {
                "\": \""
            } else {
                sep(r)
            };
            let n = r.range(20, 64);
            labelled(label, s, r.chars(URLSAFE, n))
        }
        "grafana-service-account-token" => token(format!("glsa_{}_{}", r.alnum(32), r.hex(8))),
        "mapbox-secret-token" => token(format!(
            "sk.eyJ{}.{}",
            r.chars(URLSAFE, 60),
            r.chars(URLSAFE, 22)
        )),
        "dynatrace-token" => {
            let up = format!("{UPPER}{DIGITS}");
            token(format!("dt0c01.{}.{}", r.chars(&up, 24), r.chars(&up, 64)))
        }
        "brevo-api-key" => token(format!("xkeysib-{}-{}", r.hex(64), r.alnum(16))),
        "tailscale-key" => token(format!(
            "tskey-{}-{}-{}",
            r.pick(&["api", "auth", "client"]),
            r.alnum(12),
            r.alnum(30)
        )),
        "langsmith-api-key" => token(format!(
            "lsv2_{}_{}_{}",
            r.pick(&["pt", "sk"]),
            r.hex(32),
            r.hex(10)
        )),
        "pinecone-api-key" => token(format!("pcsk_{}_{}", r.alnum(5), r.alnum(64))),
        "circleci-pat" => token(format!("CCIPAT_{}_{}", r.alnum(22), r.hex(40))),
        "shippo-api-token" => token(format!(
            "shippo_{}_{}",
            r.pick(&["live", "test"]),
            r.hex(40)
        )),
        "easypost-api-key" => token(format!("EZ{}K{}", r.pick(&["A", "T"]), r.alnum(54))),
        "flutterwave-secret-key" => {
            token(format!("FLWSECK{}-{}-X", r.pick(&["", "_TEST"]), r.hex(32)))
        }
        "razorpay-key" => token(format!("rzp_{}_{}", r.pick(&["live", "test"]), r.alnum(14))),
        "duffel-api-token" => token(format!(
            "duffel_{}_{}",
            r.pick(&["live", "test"]),
            r.chars(URLSAFE, 43)
        )),
        "sonarqube-token" => token(format!("sq{}_{}", r.pick(&["u", "p", "a"]), r.hex(40))),
        "firebase-fcm-server-key" => token(format!(
            "AAAA{}:APA91b{}",
            r.chars(URLSAFE, 7),
            r.chars(URLSAFE, 134)
        )),
        other => match PREFIXED.iter().find(|p| p.0 == other) {
            Some(&(_, prefix, alphabet, n)) => token(format!("{prefix}{}", r.chars(alphabet, n))),
            None => panic!("no generator for format {other:?}"),
        },
    }
}

pub fn uuid(r: &mut Rng) -> String {
    format!(
        "{}-{}-4{}-{}{}-{}",
        r.hex(8),
        r.hex(4),
        r.hex(3),
        r.pick(&["8", "9", "a", "b"]),
        r.hex(3),
        r.hex(12)
    )
}

/// Puts a fake credential into realistic surroundings; returns the text and the byte
/// range of the secret in it.
pub fn embed(fake: &Fake, r: &mut Rng) -> (String, std::ops::Range<usize>) {
    let (before, after) = match r.below(6) {
        0 => (
            format!(
                "{{\"id\": {}, \"note\": \"config follows\", \"value\": \"",
                r.range(1, 999)
            ),
            "\", \"ok\": true}".to_string(),
        ),
        1 => (
            "# .env\nAPP_ENV=production\nSETTING=".to_string(),
            "\nLOG_LEVEL=info\n".to_string(),
        ),
        2 => (
            "fn connect() {\n    let value = \"".to_string(),
            "\";\n    client.open(value)\n}\n".to_string(),
        ),
        3 => (
            format!(
                "2024-05-{:02}T10:22:31Z INFO worker[{}] loaded ",
                r.range(1, 28),
                r.range(1, 64)
            ),
            " from environment\n".to_string(),
        ),
        4 => (
            "settings:\n  enabled: true\n  value: ".to_string(),
            "\n  retries: 3\n".to_string(),
        ),
        _ => (
            "The credential ".to_string(),
            " was pasted into the chat.".to_string(),
        ),
    };
    let text = format!("{before}{}{after}", fake.text);
    let in_text = fake
        .text
        .find(&fake.secret)
        .expect("secret is part of the text");
    let start = before.len() + in_text;
    (text, start..start + fake.secret.len())
}

const LOREM: &[&str] = &[
    "lorem",
    "ipsum",
    "dolor",
    "sit",
    "amet",
    "consectetur",
    "adipiscing",
    "elit",
    "sed",
    "do",
    "eiusmod",
    "tempor",
    "incididunt",
    "ut",
    "labore",
    "et",
    "dolore",
    "magna",
    "aliqua",
    "enim",
    "ad",
    "minim",
    "veniam",
    "quis",
    "nostrud",
    "exercitation",
    "ullamco",
    "laboris",
    "nisi",
    "aliquip",
    "ex",
    "ea",
    "commodo",
    "consequat",
    "duis",
    "aute",
    "irure",
    "in",
    "reprehenderit",
    "voluptate",
    "velit",
    "esse",
    "cillum",
    "fugiat",
    "nulla",
    "pariatur",
];

pub fn lorem(r: &mut Rng, words: usize) -> String {
    let mut s = String::new();
    for i in 0..words {
        if i > 0 {
            s.push_str(if r.below(12) == 0 { ". " } else { " " });
        }
        s.push_str(LOREM[r.below(LOREM.len())]);
    }
    s
}

/// Ordinary text that must not be flagged: `(kind, sample)`.
pub fn negatives(seed: u64) -> Vec<(&'static str, String)> {
    let r = &mut Rng::new(seed);
    let mut out = Vec::new();
    for _ in 0..300 {
        let u = uuid(r);
        let s = match r.below(3) {
            0 => format!("{{\"id\": \"{u}\", \"status\": \"done\"}}"),
            1 => format!("request_id={u} took 12ms"),
            _ => u,
        };
        out.push(("uuid", s));
    }
    for _ in 0..300 {
        let sha = r.hex(40);
        let s = match r.below(3) {
            0 => format!("commit {sha}\nAuthor: Dev <dev@example.com>"),
            1 => format!("Merge {} into {}", &sha[..7], r.hex(7)),
            _ => format!("\"sha\": \"{sha}\""),
        };
        out.push(("git-sha", s));
    }
    for _ in 0..300 {
        let h = r.hex(64);
        let s = match r.below(3) {
            0 => format!("{h}  release-1.2.{}.tar.gz", r.range(0, 20)),
            1 => format!("image@sha256:{h}"),
            _ => format!("\"checksum\": \"sha256:{h}\""),
        };
        out.push(("sha256", s));
    }
    for _ in 0..300 {
        let n = r.range(5, 80);
        let text = lorem(r, n);
        out.push(("base64-text", base64(text.as_bytes(), r.below(4) == 0)));
    }
    for _ in 0..300 {
        let mut img = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        let n = r.range(64, 3000);
        img.extend(r.bytes(n));
        let b = base64(&img, false);
        let s = if r.below(2) == 0 {
            format!("data:image/png;base64,{b}")
        } else {
            b.as_bytes()
                .chunks(76)
                .map(|c| std::str::from_utf8(c).unwrap())
                .collect::<Vec<_>>()
                .join("\n")
        };
        out.push(("base64-image", s));
    }
    for _ in 0..300 {
        out.push(("minified-js", minified_js(r)));
    }
    for _ in 0..300 {
        let n = r.range(2, 6);
        let mut url = format!(
            "https://www.{}.com/{}/{}",
            r.chars(LOWER, 8),
            lorem(r, 3).replace(' ', "/"),
            r.chars(&format!("{LOWER}{DIGITS}-"), 20)
        );
        for i in 0..n {
            let (k, v) = match r.below(6) {
                0 => ("q", lorem(r, 3).replace(' ', "+")),
                1 => ("utm_source", r.chars(LOWER, 8)),
                2 => ("page", r.range(1, 99).to_string()),
                3 => ("ref", r.hex(12)),
                4 => ("id", uuid(r)),
                _ => ("lang", "en-us".to_string()),
            };
            url.push(if i == 0 { '?' } else { '&' });
            url.push_str(&format!("{k}={v}"));
        }
        out.push(("url", url));
    }
    for _ in 0..300 {
        let path = match r.below(3) {
            0 => format!(
                "/usr/local/lib/python3.{}/site-packages/{}/{}/{}.py",
                r.range(8, 13),
                r.chars(LOWER, 7),
                r.chars(LOWER, 5),
                r.chars(LOWER, 9)
            ),
            1 => format!(
                "C:\\Users\\{}\\AppData\\Local\\{}\\{}.dll",
                r.chars(LOWER, 6),
                r.chars(LOWER, 8),
                r.alnum(12)
            ),
            _ => format!(
                "~/projects/{}/src/{}/{}_{}.rs",
                r.chars(LOWER, 6),
                r.chars(LOWER, 5),
                r.chars(LOWER, 4),
                r.chars(LOWER, 6)
            ),
        };
        out.push(("path", path));
    }
    for _ in 0..200 {
        let n = r.range(20, 200);
        out.push(("lorem", lorem(r, n)));
    }
    for _ in 0..200 {
        out.push((
            "npm-integrity",
            format!(
                "\"node_modules/{}\": {{\n  \"version\": \"1.{}.0\",\n  \"resolved\": \"https://registry.npmjs.org/{}/-/{}-1.0.0.tgz\",\n  \"integrity\": \"sha512-{}==\"\n}}",
                r.chars(LOWER, 7),
                r.range(0, 30),
                r.chars(LOWER, 5),
                r.chars(LOWER, 5),
                r.chars(B64, 86)
            ),
        ));
    }
    for _ in 0..200 {
        out.push(("near-miss-code", near_miss(r)));
    }
    // Public keys and certificates: base64 DER like a private key's body, but public.
    for _ in 0..150 {
        let prefix = r.pick(&[
            // SubjectPublicKeyInfo, RSA 2048.
            "30820122300d06092a864886f70d01010105000382010f003082010a0282010100",
            // SubjectPublicKeyInfo, EC P-256.
            "3059301306072a8648ce3d020106082a8648ce3d03010703420004",
            // A certificate.
            "30820377308202dfa003020102020900",
            // An OpenSSH public key blob (`ssh-rsa`).
            "000000077373682d727361000000030100010000010100",
        ]);
        let mut der: Vec<u8> = (0..prefix.len() / 2)
            .map(|i| u8::from_str_radix(&prefix[i * 2..i * 2 + 2], 16).unwrap())
            .collect();
        let n = r.range(40, 400);
        der.extend(r.bytes(n));
        let b = base64(&der, false);
        let s = match r.below(3) {
            0 => format!("ssh-rsa {b} dev@laptop"),
            1 => format!("\"publicKey\": \"{b}\""),
            _ => b
                .as_bytes()
                .chunks(64)
                .map(|c| std::str::from_utf8(c).unwrap())
                .collect::<Vec<_>>()
                .join("\n"),
        };
        out.push(("public-key", s));
    }
    // AWS-looking text that is no key id: documentation placeholders, ids of four-letter
    // groups that are words.
    for _ in 0..100 {
        let s = match r.below(3) {
            0 => "aws_access_key_id = AKIA-XXXX-XXXX-XXXX-XXXX".to_string(),
            1 => format!("the AKIA prefix marks a long-term key; {}", lorem(r, 8)),
            _ => format!("AKIA{} {}", "EXAMPLE".repeat(2).split_at(14).0, lorem(r, 6)),
        };
        out.push(("aws-placeholder", s));
    }
    out
}

fn minified_js(r: &mut Rng) -> String {
    let mut s = String::from("!function(e,t){");
    let n = r.range(10, 60);
    for _ in 0..n {
        let id = match r.below(4) {
            0 => r.chars(LOWER, 1),
            1 => format!("{}{}", r.chars(LOWER, 1), r.chars_len(ALNUM, 1, 3)),
            2 => format!("_{}", r.chars_len("abcdefghijklmnopqrstuvwxyz$", 1, 3)),
            _ => r
                .pick(&[
                    "__webpack_require__",
                    "getElementById",
                    "addEventListener",
                    "tokenize",
                    "secretary",
                    "passwordStrength",
                ])
                .to_string(),
        };
        let stmt = match r.below(5) {
            0 => format!("var {id}=e[{}];", r.range(0, 999)),
            1 => format!("{id}.exports=function(n){{return n&&n.__esModule?n:{{default:n}}}};"),
            2 => format!("t.{id}=\"{}\";", r.chars_len(ALNUM, 4, 24)),
            3 => format!("if({id}){{{id}=t({})}}", r.range(0, 99)),
            _ => format!("{id}({},{});", r.range(0, 9), r.chars(LOWER, 2)),
        };
        s.push_str(&stmt);
    }
    s.push_str("}(this);");
    s
}

fn near_miss(r: &mut Rng) -> String {
    let lines = [
        "let tokens = tokenize(&input);",
        "password_field.placeholder = \"Enter your password\";",
        "if (!secret) { throw new Error(\"missing secret\"); }",
        "// The token is refreshed every hour by the auth middleware.",
        "max_tokens = 4096",
        "\"token_type\": \"Bearer\",",
        "export const API_KEY_HEADER = \"X-Api-Key\";",
        "Authorization: see the README for how to obtain a key",
        "password: ${DB_PASSWORD}",
        "secret_name = \"prod/db/credentials\"",
        "Use the bearer of this letter as the contact.",
        "postgres://localhost:5432/app",
        "See https://docs.example.com:8443/guide for details.",
        "git clone git@github.com:example/repo.git",
        "let key = cache_key(request);",
        "the secret sauce is patience",
    ];
    let n = r.range(1, 4);
    (0..n)
        .map(|_| lines[r.below(lines.len())])
        .collect::<Vec<_>>()
        .join("\n")
}

/// About `len` bytes of ordinary source code, prose and log lines, without secrets.
pub fn ordinary_text(seed: u64, len: usize) -> String {
    let r = &mut Rng::new(seed);
    let mut s = String::with_capacity(len + 256);
    while s.len() < len {
        match r.below(8) {
            0 | 1 => {
                let n = r.range(20, 80);
                s.push_str(&lorem(r, n));
                s.push_str(".\n\n");
            }
            2 => {
                s.push_str(&format!(
                    "pub fn {}_{}(input: &str, count: usize) -> Result<Vec<u8>, Error> {{\n    let mut buffer = Vec::with_capacity(count);\n    for (index, item) in input.split(',').enumerate() {{\n        buffer.extend_from_slice(item.trim().as_bytes());\n        if index > count {{ break; }}\n    }}\n    Ok(buffer)\n}}\n\n",
                    r.chars(LOWER, 6),
                    r.chars(LOWER, 4)
                ));
            }
            3 => {
                s.push_str(&format!(
                    "2024-05-{:02}T{:02}:{:02}:{:02}Z INFO request_id={} method=GET path=/api/v1/items/{} status=200 duration_ms={}\n",
                    r.range(1, 28),
                    r.range(0, 23),
                    r.range(0, 59),
                    r.range(0, 59),
                    uuid(r),
                    r.range(1, 9999),
                    r.range(1, 900)
                ));
            }
            4 => {
                s.push_str(&format!(
                    "{{\"name\": \"{}\", \"version\": \"{}.{}.{}\", \"description\": \"{}\", \"homepage\": \"https://github.com/{}/{}\"}}\n",
                    r.chars(LOWER, 8),
                    r.range(0, 9),
                    r.range(0, 30),
                    r.range(0, 9),
                    lorem(r, 8),
                    r.chars(LOWER, 6),
                    r.chars(LOWER, 8)
                ));
            }
            5 => {
                s.push_str(&format!(
                    "    // Parse the next token and update the {} state.\n    let next = self.lexer.next_token()?;\n    self.state.{} = next.kind;\n",
                    r.chars(LOWER, 6),
                    r.chars(LOWER, 5)
                ));
            }
            6 => {
                s.push_str(&format!(
                    "See /usr/share/doc/{}/README.md and commit {} for details.\n",
                    r.chars(LOWER, 7),
                    r.hex(40)
                ));
            }
            _ => {
                s.push_str(&format!(
                    "import {{ {} }} from \"./{}/{}\";\nconst {} = await fetch(`${{baseUrl}}/{}?page=${{page}}`);\n",
                    r.chars(LOWER, 8),
                    r.chars(LOWER, 5),
                    r.chars(LOWER, 7),
                    r.chars(LOWER, 6),
                    r.chars(LOWER, 6)
                ));
            }
        }
    }
    s
}

/// About `len` bytes dense with secret-like tokens: a credential (or a near miss)
/// every ~200 bytes of ordinary text.
pub fn dense_text(seed: u64, len: usize) -> String {
    dense_text_of(seed, len, FORMATS)
}

/// [`dense_text`] with credentials of the given formats only.
pub fn dense_text_of(seed: u64, len: usize, formats: &[&str]) -> String {
    let r = &mut Rng::new(seed);
    let mut s = String::with_capacity(len + 1024);
    while s.len() < len {
        let n = r.range(15, 30);
        s.push_str(&lorem(r, n));
        s.push(' ');
        let name = formats[r.below(formats.len())];
        // Keep it to tokens: a 4 KiB PGP block would not be "every 200 bytes".
        if matches!(
            name,
            "pgp-private-key-block"
                | "private-key"
                | "putty-private-key"
                | "gcp-service-account-key"
        ) {
            s.push_str(&format!("AKIA{}", r.chars(B32, 16)));
        } else {
            s.push_str(&fake(name, r).text);
        }
        s.push('\n');
    }
    s
}

/// The adversarial texts of the detector bench and of the linear-time tests: each makes
/// every keyword hit start a search (or a secret) that runs far, the shape that once
/// cost the square of its length.
pub const ADVERSARIAL: &[&str] = &[
    "repeated-token",
    "repeated-password",
    "repeated-secret",
    "repeated-api-key",
    "repeated-identifier",
    "near-miss-ghp",
    "near-miss-akia",
    "near-miss-sk",
    "near-miss-anthropic",
    "near-miss-glpat",
    "near-miss-jwt",
    "near-miss-url",
    "headers-without-footer",
    "base64-run",
    "base64-lines",
    "dense-key-value",
    "cut-keyword-near-miss",
    "runs-of-seventeen",
    "narrow-line-near-miss",
    "prefix-cut-near-miss",
];

/// Texts in an adversarial shape whose every line holds a secret: they measure what a
/// finding costs (compared with `dense_text`, per finding), not work done for nothing,
/// so they are not in [`ADVERSARIAL`].
pub const FINDINGS_ON_EVERY_LINE: &[&str] = &["narrow-line-cut-values"];

/// About `len` bytes of the adversarial text `kind` (one of [`ADVERSARIAL`] or
/// [`FINDINGS_ON_EVERY_LINE`]).
pub fn adversarial_text(kind: &str, seed: u64, len: usize) -> String {
    let r = &mut Rng::new(seed);
    let repeat = |unit: &str| {
        let mut s = unit.repeat(len / unit.len() + 1);
        s.truncate(len);
        s
    };
    match kind {
        "repeated-token" => repeat("token="),
        "repeated-password" => repeat("password="),
        "repeated-secret" => repeat("secret="),
        "repeated-api-key" => repeat("api_key:"),
        // An identifier that a labelled row reads to its end looking for `=`.
        "repeated-identifier" => repeat("SECRETKEY"),
        "near-miss-ghp" => repeat("ghp_"),
        "near-miss-akia" => repeat("AKIA"),
        "near-miss-sk" => repeat("sk-"),
        "near-miss-anthropic" => repeat("sk-ant-api03-"),
        "near-miss-glpat" => repeat("glpat-"),
        "near-miss-jwt" => repeat("eyJhbGci"),
        "near-miss-url" => repeat("postgres://user:"),
        // A key block's header again and again, never a footer: every header's search
        // looks for one to the end of the text.
        "headers-without-footer" => repeat("-----BEGIN RSA PRIVATE KEY-----\"x"),
        // One base64 string with no line breaks (a file read as a `blob`).
        "base64-run" => {
            let mut s = base64(&r.bytes(len * 3 / 4 + 3), false);
            s.truncate(len);
            s
        }
        // A key body's shape: lines of 64 base64 characters.
        "base64-lines" => units(len, || base64(&r.bytes(48), false) + "\n"),
        // Labels and low-entropy values, back to back: every pair is a search and an
        // entropy check that fails.
        "dense-key-value" => {
            const LABELS: &[&str] = &[
                "token",
                "password",
                "secret",
                "api_key",
                "SECRET_KEY",
                "access_token",
                "client_secret",
                "authorization",
                "bearer",
                "auth_token",
            ];
            units(len, || {
                let label = LABELS[r.below(LABELS.len())];
                let value = "abab".repeat(r.range(4, 12));
                format!("{label}={value}&")
            })
        }
        // A keyword's head at each line's end, its rest and one character too few on the
        // next: every line is rejoined and scanned again for nothing.
        "cut-keyword-near-miss" => units(len, || format!("- gh\n  p_{}\n", r.alnum(35))),
        // Words of exactly the shortest reported run, each after a line's indentation.
        "runs-of-seventeen" => units(len, || format!("{}\n    {} ", r.alnum(17), r.alnum(17))),
        // A label and a short value on each narrow line, then a line that has a cut
        // tail's shape (a capital and a digit, repeated: not words) but is no secret's: every
        // line is read on, rejoined and scanned again, and the joined value fails its row's
        // entropy.
        "narrow-line-near-miss" => units(len, || {
            let capital = char::from(b'G' + r.below(20) as u8);
            let digit = char::from(b'0' + r.below(10) as u8);
            let mut tail = format!("{capital}{digit}").repeat(18);
            tail.truncate(35);
            format!("token: {}\n  {tail}\n", r.alnum(2))
        }),
        // A label and a short value on each narrow line, a whole line of random tail after
        // it: every line is read on and is a finding (a text dense with secrets; one of
        // `FINDINGS_ON_EVERY_LINE`).
        "narrow-line-cut-values" => units(len, || {
            format!("token: {}\n  {}\n", r.alnum(2), r.alnum(35))
        }),
        // A whole-token prefix ending each narrow line, a whole line of tail after it one
        // character short: every line is rejoined by the cut pass and read on by the
        // narrow-line pass, and neither finds anything.
        "prefix-cut-near-miss" => units(len, || {
            format!("- ghp_{}\n  {}\n", r.alnum(20), r.alnum(15))
        }),
        other => panic!("no adversarial text {other:?}"),
    }
}

/// Units from `next`, back to back, until the text holds `len` bytes (the last unit cut).
fn units(len: usize, mut next: impl FnMut() -> String) -> String {
    let mut s = String::with_capacity(len + 80);
    while s.len() < len {
        s.push_str(&next());
    }
    s.truncate(len);
    s
}

/// The last lines of a private key file as `tail` prints them: a few full body lines,
/// the short last one and the footer, with no header (issue 22).
pub fn headless_key(r: &mut Rng) -> Fake {
    let kind = r.pick(&["RSA ", "EC ", "OPENSSH ", ""]);
    let eol = r.pick(&["\n", "\r\n"]);
    let n = r.range(1, 12);
    token(format!(
        "{}-----END {kind}PRIVATE KEY-----",
        pem_body(r, n, eol)
    ))
}

/// `fake`'s text (in one of the usual surroundings) base64-encoded, as a resource's
/// `blob` or a file read as media: the text holding it, and the range of the encoded
/// run, all of which must be found (the whole run is redacted).
pub fn encoded(fake: &Fake, r: &mut Rng) -> (String, std::ops::Range<usize>) {
    if r.below(5) == 0 {
        // Hex, as a dump or a byte-array printer writes it.
        let hex: String = fake.text.bytes().map(|b| format!("{b:02x}")).collect();
        let before = "payload (hex): ";
        return (
            format!("{before}{hex}\n"),
            before.len()..before.len() + hex.len(),
        );
    }
    let (inner, _) = embed(fake, r);
    let mut blob = base64(inner.as_bytes(), false);
    if r.below(4) == 0 {
        // RFC 4648's URL-safe alphabet, unpadded (`URLSAFE` above is an alphabet for
        // tokens, in another order).
        blob = blob
            .replace('+', "-")
            .replace('/', "_")
            .trim_end_matches('=')
            .to_string();
    }
    let (before, after) = match r.below(3) {
        0 => (
            "{\"uri\": \"file:///tmp/a.bin\", \"mimeType\": \"application/octet-stream\", \"blob\": \"",
            "\"}",
        ),
        1 => ("<img src=\"data:image/png;base64,", "\">"),
        _ => ("", ""),
    };
    let text = format!("{before}{blob}{after}");
    let range = before.len()..before.len() + blob.len();
    (text, range)
}

/// Base64 of text without secrets, which must not be flagged once decoded.
pub fn encoded_negatives(seed: u64) -> Vec<(&'static str, String)> {
    let r = &mut Rng::new(seed);
    let mut out = Vec::new();
    for (kind, text) in negatives(seed ^ 0x5A5A).into_iter().take(300) {
        let _ = kind;
        out.push((
            "base64 of ordinary text",
            base64(text.as_bytes(), r.below(2) == 0),
        ));
    }
    for (_, text) in negatives(seed ^ 0x4E58).into_iter().take(150) {
        let hex: String = text.bytes().map(|b| format!("{b:02x}")).collect();
        out.push(("hex of ordinary text", hex));
    }
    for _ in 0..100 {
        let n = r.range(18, 3000);
        out.push(("base64 of random bytes", base64(&r.bytes(n), false)));
    }
    out
}

/// The characters a cut token is rejoined over (`src/secrets/split.rs`).
fn is_token_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.' | b'+' | b'/' | b'=')
}

/// A whole token (`secret`, which starts with `keyword`) written apart, as a terminal,
/// an editor or a person does: cut by a line break (`\n`, `\r\n`, or `\n` written out as
/// in a JSON string carried inside text) somewhere after its keyword where what comes
/// before the cut is not a token of its own (`is_token(head)` is false: the token is
/// shorter than its format there), or written in groups of four after its first 12
/// characters. Returns the text written and the byte ranges of the token's pieces in it
/// (the separators between them are not part of the secret); `None` when the token is
/// too short, not one run of token characters, or a token at every cut tried.
pub fn written_apart(
    secret: &str,
    keyword: &str,
    r: &mut Rng,
    is_token: impl Fn(&str) -> bool,
) -> Option<(String, Vec<std::ops::Range<usize>>)> {
    let b = secret.as_bytes();
    if !b.iter().all(|&c| is_token_char(c)) || b.len() < keyword.len() + 8 {
        return None;
    }
    let mut cuts = Vec::new();
    let sep = match r.below(4) {
        3 => {
            if b.len() < 20 {
                return None;
            }
            let mut at = 12.max(keyword.len() + 8);
            while at < b.len() {
                cuts.push(at);
                at += 4;
            }
            " "
        }
        k => {
            let cut = (0..10)
                .map(|_| r.range(keyword.len() + 1, b.len() - 1))
                .find(|&cut| !is_token(&secret[..cut]))?;
            cuts.push(cut);
            ["\n", "\r\n", "\\n"][k]
        }
    };
    if cuts.first().is_some_and(|&cut| is_token(&secret[..cut])) {
        return None;
    }
    let mut text = String::new();
    let mut pieces = Vec::new();
    let mut from = 0;
    for &cut in cuts.iter().chain(std::iter::once(&b.len())) {
        if from > 0 {
            text.push_str(sep);
        }
        pieces.push(text.len()..text.len() + cut - from);
        text.push_str(&secret[from..cut]);
        from = cut;
    }
    Some((text, pieces))
}

/// A whole token (`secret`, which starts with `keyword`) cut by a line break inside its
/// keyword or right after it (`gh` / `p_…`, `AKIA` / `Q7ZK…`): the break a real one, CRLF
/// or `\n` written out, sometimes with the next line indented. Returns the text and the
/// two pieces' ranges in it.
pub fn cut_in_keyword(
    secret: &str,
    keyword: &str,
    r: &mut Rng,
) -> Option<(String, Vec<std::ops::Range<usize>>)> {
    if !secret.bytes().all(is_token_char) || keyword.len() < 2 || !secret.is_char_boundary(1) {
        return None;
    }
    let cut = r.range(1, keyword.len());
    let brk = r.pick(&["\n", "\r\n", "\\n", "\\r\\n"]);
    let indent = r.pick(&["", "", "  ", "\t"]);
    let (head, tail) = secret.split_at(cut);
    let text = format!("{head}{brk}{indent}{tail}");
    let pieces = vec![0..head.len(), text.len() - tail.len()..text.len()];
    Some((text, pieces))
}

/// `fake` percent-encoded whole (label and all) the way a URL's query carries a value:
/// every character outside `[A-Za-z0-9_.~-]` escaped, and some letters and digits too.
/// `None` for a secret with whitespace or a backslash in it (a key block): nobody passes
/// those in a URL.
pub fn percent_encoded(fake: &Fake, r: &mut Rng) -> Option<(String, std::ops::Range<usize>)> {
    if fake
        .secret
        .bytes()
        .any(|b| b.is_ascii_whitespace() || b == b'\\')
    {
        return None;
    }
    let mut encode = |s: &str, force_one: bool| {
        let mut escaped = String::new();
        let mut escapes = 0;
        for b in s.bytes() {
            let plain = b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'~' | b'-');
            if !plain || r.below(4) == 0 {
                escaped.push_str(&format!("%{b:02X}"));
                escapes += 1;
            } else {
                escaped.push(char::from(b));
            }
        }
        if force_one && escapes == 0 {
            escaped = format!("%{:02X}{}", s.as_bytes()[0], &escaped[1..]);
        }
        escaped
    };
    let at = fake
        .text
        .find(&fake.secret)
        .expect("secret is part of the text");
    let head = encode(&fake.text[..at], false);
    let secret = encode(&fake.secret, true);
    let tail = encode(&fake.text[at + fake.secret.len()..], false);
    let before = format!(
        "GET https://api.example.test/v{}/items?q={head}",
        r.range(1, 3)
    );
    let text = format!("{before}{secret}{tail} HTTP/1.1");
    Some((text, before.len()..before.len() + secret.len()))
}

/// Ordinary text shaped like what the rejoin and percent-decoding passes read, which must
/// not be flagged: prose wrapped at a fixed width, a complete key followed by the next
/// line's setting, identifiers and hashes broken by breaks, words about token prefixes,
/// base64 and hex wrapped in lines, stringified JSON with `\n` escapes, URLs full of
/// escapes.
pub fn split_and_percent_negatives(seed: u64) -> Vec<(&'static str, String)> {
    let r = &mut Rng::new(seed);
    let mut out = Vec::new();
    for _ in 0..200 {
        let n = r.range(30, 200);
        let prose = lorem(r, n);
        let width = r.range(20, 80);
        let mut wrapped = String::new();
        for (i, c) in prose.chars().enumerate() {
            if i > 0 && i % width == 0 {
                wrapped.push_str(["\n", "\r\n", "\\n", " "][r.below(4)]);
            }
            wrapped.push(c);
        }
        out.push(("prose wrapped mid-word", wrapped));
    }
    for _ in 0..200 {
        let words = r.range(2, 6);
        let ident: Vec<String> = (0..words).map(|_| lorem(r, 1)).collect();
        let snake = ident.join("_");
        let at = r.range(1, snake.len() - 1);
        out.push((
            "identifier split by a break",
            format!(
                "let {}\n{} = compute_{}();",
                &snake[..at],
                &snake[at..],
                uuid(r).replace('-', "_")
            ),
        ));
    }
    for _ in 0..200 {
        let prefix = r.pick(&[
            "ghp_",
            "AKIA",
            "glpat-",
            "xoxb-",
            "sk-ant-",
            "npm_",
            "github_pat_",
            "hf_",
            "sk_live_",
        ]);
        let brk = r.pick(&["\n", "\r\n", "\\n", " "]);
        let text = match r.below(4) {
            0 => format!("Tokens start with {prefix}{brk}followed by random characters."),
            1 => format!(
                "export TOKEN={prefix}{}{brk}region = eu-west-1",
                r.pick(&["...", "<redacted>", "XXXX", ""])
            ),
            2 => {
                format!("- the {prefix} prefix{brk}marks a credential; rotate_it_every_ninety_days")
            }
            _ => format!("{prefix}example{brk}{}", lorem(r, 6)),
        };
        out.push(("words about a token prefix", text));
    }
    for _ in 0..200 {
        let lines: Vec<String> = (0..r.range(2, 8))
            .map(|_| format!("\"{}\": \"{}\"", lorem(r, 1), lorem(r, 2)))
            .collect();
        out.push((
            "stringified JSON",
            format!("{{\\n  {}\\n}}", lines.join(",\\n  ")),
        ));
    }
    for _ in 0..200 {
        let n = r.range(2, 8);
        let q: String = lorem(r, n)
            .bytes()
            .map(|b| match b {
                b' ' => "%20".to_string(),
                b',' | b'.' => format!("%{b:02X}"),
                _ => char::from(b).to_string(),
            })
            .collect();
        let s = match r.below(3) {
            0 => format!("https://www.example.test/search?q={q}&lang=en"),
            1 => format!(
                "file:///home/dev/My%20Documents/{}%20{}.txt",
                lorem(r, 1),
                r.range(1, 99)
            ),
            _ => format!(
                "GET /api/v2/items?filter={q}&sort=-created_at&id={} 200",
                uuid(r)
            ),
        };
        out.push(("URL with escapes", s));
    }
    // A line ending in a word that begins a token's keyword (`gh`, `AK`, `sk-`), then a
    // line starting with a long run that does not go on with that keyword.
    for _ in 0..300 {
        let head = r.pick(&[
            "gh", "AK", "AKI", "AS", "xo", "xox", "gl", "glp", "sk", "sk-", "hf", "np", "npm",
            "SG", "dp", "ya2", "sq0", "dap", "NR", "LT", "rzp", "AI", "AIz",
        ]);
        let brk = r.pick(&["\n", "\r\n", "\\n"]);
        let indent = r.pick(&["", "    ", "\t"]);
        let run = match r.below(6) {
            0 => r.hex(40),
            1 => uuid(r),
            2 => {
                let len = r.range(24, 60);
                base64(&r.bytes(len), r.below(2) == 0)
            }
            3 => (0..r.range(3, 6))
                .map(|_| lorem(r, 1))
                .collect::<Vec<_>>()
                .join("_"),
            4 => format!("p_{}", lorem(r, 4).replace(' ', "_")),
            _ => format!("/usr/share/{}/{}.conf", lorem(r, 1), lorem(r, 1)),
        };
        let before = match r.below(3) {
            0 => format!("$ {head}"),
            1 => format!("- name: {}\n  tool: {head}", lorem(r, 1)),
            _ => format!("{} {head}", lorem(r, 4)),
        };
        out.push((
            "line ending in a keyword's head",
            format!("{before}{brk}{indent}{run} {}", lorem(r, 3)),
        ));
    }
    for _ in 0..100 {
        let sha = r.hex(40);
        let (a, b) = sha.split_at(r.range(8, 32));
        out.push((
            "hash split by a break",
            format!("commit {a}\n{b}\nAuthor: Dev"),
        ));
    }
    for _ in 0..100 {
        let len = r.range(120, 600);
        let url = r.below(2) == 0;
        let blob = base64(&r.bytes(len), url);
        let width = *r.pick(&[&64usize, &76]);
        let lines: Vec<&str> = blob
            .as_bytes()
            .chunks(width)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        out.push(("base64 wrapped in lines", lines.join("\n")));
    }
    out
}

/// Whether `tail` is random characters as a deliberate cut leaves them: a digit with a
/// letter on each side (`Lp2Rz9Kw`, `a3f9`), which no word, number, version or name
/// with a number (`EOF`, `ID123`, `HTTP/1.1`, `node-01`) holds, and not a hash's hex
/// digits alone (32, 40 or 64 of them), which a line of its own reads as.
fn is_random_tail(tail: &str) -> bool {
    let hash = matches!(tail.len(), 32 | 40 | 64) && tail.bytes().all(|b| b.is_ascii_hexdigit());
    !hash
        && tail.as_bytes().windows(3).any(|w| {
            w[0].is_ascii_alphabetic() && w[1].is_ascii_digit() && w[2].is_ascii_alphabetic()
        })
}

/// `fake` cut on a narrow line (issue 40), as a person or a server printing into a
/// narrow column cuts it: a labelled value anywhere in its value; a token whose format
/// has no fixed length after a head that is a token already (`is_whole_token(head)`),
/// or whole on the line, then more of it (a longer token of the same format:
/// `is_whole_token(head + tail)`). A format of fixed length cut short is
/// [`written_apart`]'s. The line before the break is narrower than a wrap (under 60
/// bytes) and the tail is a whole line of 4 to 48 random characters
/// ([`is_random_tail`]; a token's drawn from its own last characters), closed by the
/// value's quote when it has one. Returns the text and the byte ranges of the value's
/// pieces in it; `None` when no such cut was found in a few tries (a fixed-length or a
/// long token, a value with punctuation in its tail).
pub fn cut_on_a_narrow_line(
    fake: &Fake,
    r: &mut Rng,
    is_whole_token: impl Fn(&str) -> bool,
) -> Option<(String, Vec<std::ops::Range<usize>>)> {
    let value_at = fake.text.len().checked_sub(fake.secret.len())?;
    // A value whose label is on a line before it (an AWS secret under its key id) is
    // not read from the label's line.
    if !fake.text.ends_with(&fake.secret)
        || fake.secret.len() < 8
        || fake.text[..value_at].contains('\n')
    {
        return None;
    }
    let close = match fake.text[..value_at].chars().last() {
        Some(q @ ('"' | '\'' | '`')) => q.to_string(),
        _ => String::new(),
    };
    let secret = &fake.secret;
    let labelled = value_at > 0;
    let inner_cut = (0..20)
        .map(|_| secret.len() - r.range(4, 48.min(secret.len() - 1)))
        .find(|&cut| {
            let (head, tail) = secret.split_at(cut);
            value_at + cut < 56
                && is_token_char(head.as_bytes()[cut - 1])
                && tail.bytes().all(is_token_char)
                && is_random_tail(tail)
                && (labelled || is_whole_token(head))
        });
    let (head, tail) = if let Some(cut) = inner_cut {
        (
            fake.text[..value_at + cut].to_string(),
            secret[cut..].to_string(),
        )
    } else if labelled {
        return None;
    } else {
        let body = &secret.as_bytes()[secret.len().saturating_sub(16)..];
        let tail = (0..20)
            .map(|_| {
                let n = r.range(4, 16);
                (0..n)
                    .map(|_| char::from(body[r.below(body.len())]))
                    .collect::<String>()
            })
            .find(|tail| tail.bytes().all(is_token_char) && is_random_tail(tail))?;
        if secret.len() >= 56 || !is_whole_token(&format!("{secret}{tail}")) {
            return None;
        }
        (secret.clone(), tail)
    };
    let brk = r.pick(&["\n", "\r\n", "\\n"]);
    let (before, indent, after) = match r.below(5) {
        0 => ("", "", String::new()),
        1 => (
            "config:\n",
            "  ",
            format!("\n  region: eu-west-{}", r.range(1, 3)),
        ),
        2 => ("HOST=db.internal\n", "", "\nPORT=5432\n".to_string()),
        3 => ("cat <<EOF > .env\n", "", "\nEOF\n".to_string()),
        _ => ("$ print-credentials --narrow\n", "", "\n$ ".to_string()),
    };
    let mut text = format!("{before}{indent}");
    let head_start = text.len() + value_at;
    text.push_str(&head);
    let head = head_start..text.len();
    text.push_str(brk);
    text.push_str(indent);
    let tail_range = text.len()..text.len() + tail.len();
    text.push_str(&tail);
    text.push_str(&close);
    text.push_str(&after);
    Some((text, vec![head, tail_range]))
}

/// Ordinary narrow-line text (issue 40) that must not be flagged when a narrow line's
/// value is read on into a cut tail: settings lists, `.env` files, heredocs, shell
/// scripts, code and tables, where a line with a password, token or key label and a
/// placeholder value is followed by a line that is a word (`EOF`, `END`), a name with a
/// number (`ID123`, `Region2: x`), a version, a date, `HTTP/1.1`, a commit hash or a
/// UUID.
pub fn narrow_line_negatives(seed: u64) -> Vec<(&'static str, String)> {
    let r = &mut Rng::new(seed);
    let mut out = Vec::new();
    let labels = [
        "password",
        "PASSWORD",
        "db_password",
        "DB_PASSWORD",
        "token",
        "TOKEN",
        "access_token",
        "ACCESS_TOKEN",
        "auth_token",
        "secret",
        "client_secret",
        "SECRET_VALUE",
        "api_key",
        "API_KEY",
        "apiKey",
        "passwd",
    ];
    // A password label takes any value of 8 characters or more as its secret (the plain
    // scan flags `password=changeme`), and its value reads on over a `\n` written out:
    // after one, a placeholder is short and the break real.
    let short_values = [
        "none", "null", "dev", "test", "env", "local", "true", "5432", "db01", "example", "sample",
        "default", "unset", "empty", "N/A",
    ];
    let long_values = [
        "changeme",
        "required",
        "placeholder",
        "from-vault",
        "redacted",
        "prod-eu-1",
        "us-east-1",
        "sample-value",
        "xxxxxxxx",
    ];
    let value_for = |r: &mut Rng, label: &str| -> String {
        if label.to_ascii_lowercase().contains("pass") || r.below(2) == 0 {
            r.pick(&short_values).to_string()
        } else {
            r.pick(&long_values).to_string()
        }
    };
    let break_for = |r: &mut Rng, label: &str| -> &'static str {
        if label.to_ascii_lowercase().contains("pass") {
            r.pick(&["\n", "\r\n"])
        } else {
            r.pick(&["\n", "\r\n", "\\n"])
        }
    };
    let next_line = |r: &mut Rng| -> String {
        match r.below(16) {
            0 => format!("Region{}: {}", r.range(1, 9), lorem(r, 1)),
            1 => format!("ID{}", r.range(1, 99999)),
            2 => r
                .pick(&["END", "EOF", "EOT", "DONE", "OK", "FIN"])
                .to_string(),
            3 => format!("HTTP/1.{}", r.below(2)),
            4 => r.hex(40),
            5 => uuid(r),
            6 => format!(
                "{}-{:02}-{:02}",
                r.range(2019, 2026),
                r.range(1, 12),
                r.range(1, 28)
            ),
            7 => format!("v{}.{}.{}", r.range(0, 9), r.range(0, 30), r.range(0, 99)),
            8 => format!("node-{:02}", r.range(1, 40)),
            9 => r
                .pick(&["NextPage", "Done", "Summary", "ReadMe", "Continue", "Retry"])
                .to_string(),
            10 => format!("{}", r.range(1000, 999_999)),
            11 => r
                .pick(&["x86_64", "aarch64", "arm64", "i686", "UTF-8", "en_US"])
                .to_string(),
            12 => format!("{}{}", lorem(r, 1).to_uppercase(), r.range(1, 99)),
            13 => r.hex(32),
            14 => format!(
                "{}.{}",
                lorem(r, 1),
                r.pick(&["md", "txt", "yaml", "json", "PDF"])
            ),
            _ => format!("Q{}", r.range(1, 4)),
        }
    };
    for _ in 0..120 {
        let label = r.pick(&labels);
        let sep = r.pick(&[": ", "=", " = "]);
        let value = value_for(r, label);
        let next = next_line(r);
        // `\n` written out before `api_key` too: its `n` is no keyword's first letter
        // (`napi_`, neon's prefix).
        let brk = break_for(r, label);
        let before = lorem(r, 1);
        out.push((
            "settings list, then a name or an id",
            format!(
                "{before}: {}{brk}{label}{sep}{value}{brk}{next}{brk}",
                r.range(1, 9)
            ),
        ));
    }
    for _ in 0..60 {
        let label = r.pick(&labels).to_uppercase();
        let value = value_for(r, &label);
        let next = next_line(r);
        let text = match r.below(3) {
            0 => format!("cat <<EOF > .env\nAPP_ENV=prod\n{label}={value}\nEOF\n{next}\n"),
            1 => format!("ssh deploy@host <<-END\n\texport {label}={value}\n\tEND\n{next}"),
            _ => format!("# .env\n{label}={value}\n{next}\nLOG_LEVEL=info\n"),
        };
        out.push(("heredoc or .env file", text));
    }
    for _ in 0..60 {
        let label = r.pick(&labels);
        let value = value_for(r, label);
        let next = next_line(r);
        let text = match r.below(4) {
            0 => format!("if [ -z \"$1\" ]; then\n  {label}={value}\nfi\n{next}\n"),
            1 => format!("local {label} = {value}\nif {label} then\n  return {label}\nend\n{next}"),
            2 => format!("def {label}\n  @{label} ||= {value}\nend\n{next}"),
            _ => format!("10 LET {label} = {value}\n20 PRINT {label}\n{next}"),
        };
        out.push(("script or code", text));
    }
    for _ in 0..60 {
        let label = r.pick(&labels);
        let value = value_for(r, label);
        let next = next_line(r);
        let text = match r.below(3) {
            0 => format!("NAME      {label}\nweb01     {value}\n{next}\n"),
            1 => format!("| key | value |\n| {label} | {value} |\n{next}"),
            _ => format!("{label}\n  {value}\n{next}\n"),
        };
        out.push(("table or column", text));
    }
    for _ in 0..60 {
        let label = r.pick(&labels);
        let value = value_for(r, label);
        let text = match r.below(3) {
            0 => format!(
                "commit: {}\n{label}: {value}\n{}\nAuthor: Dev",
                r.hex(7),
                r.hex(40)
            ),
            1 => format!("request_id: {}\n{label}: {value}\n{}\n", r.hex(8), uuid(r)),
            _ => format!("{label}: {value}\nsha256:\n{}\n", r.hex(64)),
        };
        out.push(("hash or UUID line", text));
    }
    out
}
