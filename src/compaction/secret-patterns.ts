/**
 * The secret shapes the service recognizes itself, as data. They cover what secretlint's recommended
 * preset (run beside them, see src/secrets/) lacks or needs context for, and they are the whole
 * detection wherever the preset is not wired in. Each names where its shape is documented.
 *
 * `prefix`: where a match can start, matched case-insensitively by one combined scan of the text;
 * `pattern`: checked (case-sensitively, sticky) at that place; `group`: the part replaced (0: all);
 * `wordStart`: the match may not continue a word; `contains`: text every match holds, where the prefix
 * opens with a class (a text without it is scanned without the pattern: such a prefix is tried at every
 * word of every text).
 */
export interface SecretPattern {
  kind: string
  prefix: string
  pattern: string
  group?: number
  wordStart?: boolean
  contains?: string
  /**
   * The pattern scans the rest of its line for a flag after a command (`curl … -u user:pass`): where it fails
   * at a place, it fails at every later place on that line (the flags it could reach are fewer), so it is not
   * tried again there. That keeps a line of the command repeated linear instead of quadratic.
   */
  lineScan?: true
  source: string
}

/** Characters a value assigned to a secret's name may hold, up to the first that ends it. */
const VALUE = `[^\\s"'\`,;()[{}\\]]`

export const SECRET_PATTERNS: readonly SecretPattern[] = [
  // Keys and tokens with a recognizable prefix, longest prefixes first where they share a start.
  {
    kind: 'private_key',
    prefix: '-----BEGIN',
    pattern: '-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\\s\\S]*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|$)',
    source: 'RFC 7468 (PEM), OpenSSH PROTOCOL.key'
  },
  { kind: 'anthropic_key', prefix: 'sk-ant-', pattern: 'sk-ant-[A-Za-z0-9_-]{16,}', wordStart: true, source: 'Anthropic API keys (sk-ant-…)' },
  {
    kind: 'openai_key',
    prefix: 'sk-',
    pattern: 'sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}',
    wordStart: true,
    source: 'OpenAI API keys (sk-, sk-proj-, sk-svcacct-, sk-admin-)'
  },
  {
    kind: 'stripe_key',
    prefix: '[sr]k_(?:live|test)_',
    pattern: '[sr]k_(?:live|test)_[A-Za-z0-9]{16,}',
    wordStart: true,
    source: 'Stripe docs: API keys (sk_live_, rk_live_, sk_test_, rk_test_)'
  },
  {
    kind: 'github_token',
    prefix: 'gh[pousr]_|github_pat_',
    pattern: '(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})',
    wordStart: true,
    source: 'GitHub docs: about authentication, token formats'
  },
  {
    kind: 'gitlab_token',
    prefix: 'gl(?:pat|dt|rt|ptt|ft|cbt|soat|agent|oas)-',
    pattern: 'gl(?:pat|dt|rt|ptt|ft|cbt|soat|agent|oas)-[A-Za-z0-9_-]{20,}',
    wordStart: true,
    source: 'GitLab docs: token prefixes'
  },
  { kind: 'slack_token', prefix: 'xox[abposre]-', pattern: 'xox[abposre]-[A-Za-z0-9-]{10,}', wordStart: true, source: 'Slack docs: token types' },
  {
    kind: 'slack_webhook',
    prefix: 'hooks\\.slack\\.com/',
    pattern: 'hooks\\.slack\\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]{20,}',
    source: 'Slack docs: incoming webhooks'
  },
  {
    kind: 'aws_access_key',
    prefix: '(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)',
    pattern: '(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}(?![A-Za-z0-9_])',
    wordStart: true,
    source: 'AWS IAM docs: unique ID prefixes'
  },
  { kind: 'google_api_key', prefix: 'AIza', pattern: 'AIza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])', wordStart: true, source: 'Google Cloud docs: API keys' },
  { kind: 'google_oauth_token', prefix: 'ya29\\.', pattern: 'ya29\\.[0-9A-Za-z_-]{20,}', wordStart: true, source: 'Google OAuth 2.0 access tokens (ya29.)' },
  { kind: 'huggingface_token', prefix: 'hf_', pattern: 'hf_[A-Za-z0-9]{30,}', wordStart: true, source: 'Hugging Face docs: user access tokens' },
  {
    kind: 'sendgrid_key',
    prefix: 'SG\\.',
    pattern: 'SG\\.[A-Za-z0-9_-]{16,32}\\.[A-Za-z0-9_-]{16,64}',
    wordStart: true,
    source: 'Twilio SendGrid docs: API keys'
  },
  { kind: 'twilio_key', prefix: 'SK', pattern: 'SK[0-9a-f]{32}(?![A-Za-z0-9])', wordStart: true, source: 'Twilio docs: API key SIDs' },
  // in a URL the token follows `bot` (api.telegram.org/bot<id>:<token>/…): it may continue a word, not a number
  {
    kind: 'telegram_bot_token',
    prefix: '(?<![0-9])\\d{8,10}:AA',
    pattern: '\\d{8,10}:AA[A-Za-z0-9_-]{30,}',
    source: 'Telegram Bot API: authorizing your bot (https://api.telegram.org/bot<token>/METHOD)'
  },
  { kind: 'npm_token', prefix: 'npm_', pattern: 'npm_[A-Za-z0-9]{36}', wordStart: true, source: 'npm docs: access tokens' },
  { kind: 'pypi_token', prefix: 'pypi-', pattern: 'pypi-[A-Za-z0-9_-]{50,}', wordStart: true, source: 'PyPI docs: API tokens (pypi-AgEI…)' },
  {
    kind: 'shopify_token',
    prefix: 'shp(?:at|ca|pa|ss)_',
    pattern: 'shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}',
    wordStart: true,
    source: 'Shopify docs: access tokens'
  },
  { kind: 'linear_key', prefix: 'lin_(?:api|oauth)_', pattern: 'lin_(?:api|oauth)_[A-Za-z0-9]{32,}', wordStart: true, source: 'Linear docs: API keys' },
  {
    kind: 'doppler_token',
    prefix: 'dp\\.(?:pt|st|sa|ct|scim|audit)\\.',
    pattern: 'dp\\.(?:pt|st|sa|ct|scim|audit)\\.[A-Za-z0-9]{30,}',
    wordStart: true,
    source: 'Doppler docs: token formats'
  },
  { kind: 'databricks_token', prefix: 'dapi', pattern: 'dapi[a-f0-9]{32}(?:-\\d)?', wordStart: true, source: 'Databricks docs: personal access tokens' },
  { kind: 'digitalocean_token', prefix: 'do[opr]_v1_', pattern: 'do[opr]_v1_[a-f0-9]{64}', wordStart: true, source: 'DigitalOcean docs: token prefixes' },
  { kind: 'heroku_key', prefix: 'HRKU-', pattern: 'HRKU-[A-Za-z0-9_-]{20,}', wordStart: true, source: 'Heroku Dev Center: API key format' },
  {
    kind: 'jwt',
    prefix: 'eyJ',
    pattern: 'eyJ[A-Za-z0-9_-]{8,}\\.eyJ[A-Za-z0-9_-]{8,}\\.[A-Za-z0-9_-]{8,}',
    wordStart: true,
    source: 'RFC 7519 (JWT), base64url of "{"'
  },
  {
    kind: 'google_oauth_client_secret',
    prefix: 'GOCSPX-',
    pattern: 'GOCSPX-[A-Za-z0-9_-]{24,}',
    wordStart: true,
    source: 'Google Cloud docs: OAuth client secrets (GOCSPX-)'
  },
  {
    kind: 'atlassian_token',
    prefix: 'AT(?:ATT|CTT)',
    pattern: 'AT(?:ATT|CTT)[A-Za-z0-9_=-]{40,}',
    wordStart: true,
    source: 'Atlassian docs: API tokens (ATATT…)'
  },
  {
    kind: 'terraform_token',
    prefix: '[A-Za-z0-9]{14}\\.atlasv1\\.',
    pattern: '[A-Za-z0-9]{14}\\.atlasv1\\.[A-Za-z0-9_-]{60,}',
    wordStart: true,
    contains: '.atlasv1.',
    source: 'HashiCorp docs: Terraform Cloud API tokens (….atlasv1.…)'
  },
  {
    kind: 'discord_token',
    prefix: '[MNO][A-Za-z0-9_-]{22,31}\\.',
    pattern: '[MNO][A-Za-z0-9_-]{22,31}\\.[A-Za-z0-9_-]{6,7}\\.[A-Za-z0-9_-]{27,45}(?![A-Za-z0-9_-])',
    wordStart: true,
    source: 'Discord developer docs: bot tokens (three base64url parts: the bot id, a snowflake of 17 to 20 digits, 23 to 27 characters; a timestamp; an HMAC)'
  },
  {
    kind: 'discord_webhook',
    prefix: 'discord(?:app)?\\.com/api/webhooks/',
    pattern: 'discord(?:app)?\\.com/api/webhooks/\\d+/([A-Za-z0-9_-]{30,})',
    group: 1,
    source: 'Discord developer docs: webhooks'
  },
  {
    kind: 'age_secret_key',
    prefix: 'AGE-SECRET-KEY-1',
    pattern: 'AGE-SECRET-KEY-1[0-9A-Z]{50,}',
    wordStart: true,
    source: 'age (age-encryption.org/v1): secret keys'
  },
  {
    kind: 'fcm_server_key',
    prefix: 'AAAA',
    pattern: 'AAAA[A-Za-z0-9_-]{7}:[A-Za-z0-9_-]{100,}',
    wordStart: true,
    source: 'Firebase Cloud Messaging: legacy server keys'
  },
  {
    kind: 'okta_token',
    prefix: 'SSWS',
    pattern: 'SSWS\\s+([A-Za-z0-9_-]{20,})',
    group: 1,
    wordStart: true,
    source: 'Okta docs: API tokens (Authorization: SSWS …)'
  },
  {
    kind: 'azure_storage_key',
    prefix: 'AccountKey=',
    pattern: 'AccountKey=([A-Za-z0-9+/]{40,}={0,2})',
    group: 1,
    source: 'Azure Storage docs: connection strings'
  },
  {
    kind: 'azure_sas',
    prefix: 'SharedAccessSignature=|[?&]sig=',
    pattern: '(?:SharedAccessSignature=|[?&]sig=)([A-Za-z0-9%+/=_-]{16,})',
    group: 1,
    source: 'Azure Storage docs: shared access signatures'
  },
  // Credentials by their place rather than their shape.
  {
    kind: 'url_password',
    prefix: '://',
    pattern: ':\\/\\/[^\\s:/@\'"]*:([^\\s@/\'"]+)@',
    group: 1,
    source: 'RFC 3986 userinfo (scheme://user:password@host, the user may be empty: redis://:password@host)'
  },
  { kind: 'bearer_token', prefix: 'bearer', pattern: '[Bb]earer\\s+([A-Za-z0-9._~+/=-]{16,})', group: 1, wordStart: true, source: 'RFC 6750 (Bearer)' },
  {
    kind: 'basic_auth',
    prefix: 'basic',
    pattern: '[Bb]asic\\s+([A-Za-z0-9+/]{6,}={0,2})',
    group: 1,
    wordStart: true,
    source: 'RFC 7617 (Basic: base64 of user:password)'
  },
  {
    kind: 'curl_user',
    prefix: 'curl',
    pattern: `curl\\b[^\\n]*?\\s(?:-u|--user)[ =]?['"]?[^\\s'":]+:([^\\s'"]+)`,
    group: 1,
    wordStart: true,
    lineScan: true,
    source: 'curl manual: -u, --user <user:password>'
  },
  {
    kind: 'password_flag',
    prefix: '--password',
    pattern: `--password[= ](['"]?)(${VALUE}{3,})\\1`,
    group: 2,
    source: 'command-line --password=VALUE, --password VALUE'
  },
  {
    kind: 'password_flag',
    prefix: '(?:mysql|mysqldump|mysqladmin|mariadb)\\b',
    pattern: `(?:mysql|mysqldump|mysqladmin|mariadb)\\b[^\\n]*?\\s-p(${VALUE}{3,})`,
    group: 1,
    wordStart: true,
    lineScan: true,
    source: 'MySQL manual: -pPASSWORD'
  },
  {
    kind: 'password_flag',
    prefix: 'sshpass\\b',
    pattern: `sshpass\\s+-p\\s*(['"]?)(${VALUE}{3,})\\1`,
    group: 2,
    wordStart: true,
    source: 'sshpass manual: -p password'
  },
  {
    kind: 'password_flag',
    prefix: 'redis-cli\\b',
    pattern: `redis-cli\\b[^\\n]*?\\s(?:-a|--pass)\\s+(['"]?)(${VALUE}{3,})\\1`,
    group: 2,
    wordStart: true,
    lineScan: true,
    source: 'redis-cli manual: -a <password>'
  },
  {
    kind: 'password_flag',
    prefix: 'az\\s+login\\b',
    pattern: `az\\s+login\\b[^\\n]*?\\s(?:-p|--password)[ =](['"]?)(${VALUE}{3,})\\1`,
    group: 2,
    wordStart: true,
    lineScan: true,
    source: 'Azure CLI: az login -p'
  },
  {
    kind: 'token_flag',
    prefix: '--(?:token|api-key|apikey|auth-token|access-token|secret|client-secret)\\b',
    pattern: `--(?:token|api-key|apikey|auth-token|access-token|secret|client-secret)[= ](['"]?)(${VALUE}{6,})\\1`,
    group: 2,
    source: 'command-line --token VALUE and the like'
  },
  { kind: 'docker_auth', prefix: '"auth"', pattern: '"auth"\\s*:\\s*"([A-Za-z0-9+/]{8,}={0,2})"', group: 1, source: 'Docker docs: config.json auths' }
]

/**
 * Names a secret is assigned to (in .env, YAML, JSON and code): the value after `=`, `:` or `=>` goes.
 * A name may be part of a longer one (DB_PASSWORD, SECRET_KEY, githubToken).
 */
/** The names among SECRET_NAMES whose value is a password or a passphrase: words without digits are such values too. */
export const PASSWORD_NAMES = /password|passwd|passphrase|pwd|(?<![A-Za-z])pass(?![A-Za-z])|secret/i

export const SECRET_NAMES =
  'password|passwd|passphrase|pwd|(?<![A-Za-z])pass(?![A-Za-z])|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key|(?:signing|encryption|master|hmac|session|jwt)[_-]?key|client[_-]key[_-]data|(?<![A-Za-z])_auth(?![A-Za-z])|credentials?|client[_-]?secret'

/**
 * What follows a secret's name: the rest of the name, a separator (`=`, `:`, `=>`, Go's `:=`; after a quoted
 * name, a subscript's `"] =` or a call's `", "`), then a quoted value, spaces allowed (group 2, its quote
 * group 1), or a bare one (group 3: the caller decides how long one must be, and reads on past brackets).
 */
export const ASSIGNED_VALUE = `[A-Za-z0-9_.-]*(?:["']\\]?\\s*(?::=|=>|=|:|,)|\\s*(?::=|=>|=|:))(?![=:])\\s*(?:(["'])([^"'\\n\\\\]{6,}?)\\1|(${VALUE}*))`

/**
 * Lines that are only base64, as the body of a PEM or OpenSSH key is (64 or 70 characters a line),
 * so that a key whose BEGIN line was cut off is still found. Mixed case and a digit are required, and
 * hex alone never matches, so that hashes and git SHAs are left alone.
 */
export const KEY_BODY_LINE = '^[ \\t]*([A-Za-z0-9+/]{60,76}={0,2})[ \\t]*$'
