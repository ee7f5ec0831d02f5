import { randomBytes, randomInt } from 'node:crypto'

/**
 * Credentials of every kind the service must keep in, made at test time from random parts, so that
 * the repository itself holds nothing a scanner would flag. `secret` is the part that must never leave;
 * `text` is how it shows up in a history.
 */
export interface Planted {
  kind: string
  secret: string
  text: string
}

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'
const pick = (alphabet: string, n: number): string => {
  let s = ''
  for (let i = 0; i < n; i++) s += alphabet[randomInt(alphabet.length)]
  return s
}
/** Random text that surely mixes upper case, lower case and digits. */
const mixed = (n: number, alphabet = ALNUM): string => `A1b${pick(alphabet, n - 3)}`
const alnum = (n: number): string => mixed(n)
const hex = (n: number): string =>
  randomBytes(Math.ceil(n / 2))
    .toString('hex')
    .slice(0, n)
const b64 = (n: number): string => mixed(n, `${ALNUM}+/`)
const b64url = (n: number): string => mixed(n, `${ALNUM}_-`)
const digits = (n: number): string => `${randomInt(1, 10)}${pick('0123456789', n - 1)}`
const upper = (n: number): string => pick('ABCDEFGHIJKLMNOPQRSTUVWXYZ234567', n)
const basic = (user: string, pass: string): string => Buffer.from(`${user}:${pass}`).toString('base64')

function pem(label: string): string {
  const body = Array.from({ length: 8 }, () => b64(64)).join('\n')
  return `-----BEGIN ${label}-----\n${body}\n${b64(20)}==\n-----END ${label}-----`
}

export function plantSecrets(): Planted[] {
  const s = (kind: string, secret: string, text: string = secret): Planted => ({ kind, secret, text })
  const azureKey = `${b64(86)}==`
  const password = `Pw${alnum(14)}!`
  const dockerAuth = basic('builder', `dk${alnum(16)}`)
  const basicAuth = basic('admin', `bA${alnum(12)}`)
  const pemKey = pem('RSA PRIVATE KEY')
  const sshKey = pem('OPENSSH PRIVATE KEY')
  const keyBody = Array.from({ length: 6 }, () => b64(64)).join('\n')
  return [
    s('aws key id', `AKIA${upper(16)}`, ''),
    s('aws secret', b64(40), ''),
    s('gcp api key', `AIza${b64url(35)}`),
    s('gcp oauth token', `ya29.${b64url(60)}`),
    s('azure storage key', azureKey, `DefaultEndpointsProtocol=https;AccountName=acct${hex(6)};AccountKey=${azureKey};EndpointSuffix=core.windows.net`),
    s('azure sas', `sv2022${b64url(40)}`, ''),
    s('github classic', `ghp_${alnum(36)}`),
    s('github fine-grained', `github_pat_${alnum(22)}_${alnum(59)}`),
    s('github oauth', `gho_${alnum(36)}`),
    s('gitlab', `glpat-${b64url(20)}`),
    s('anthropic', `sk-ant-api03-${b64url(93)}AA`),
    s('openai', `sk-proj-${b64url(48)}`),
    s('hugging face', `hf_${mixed(34, 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz')}`),
    s('stripe secret', `sk_live_${alnum(40)}`),
    s('stripe restricted', `rk_live_${alnum(40)}`),
    s('slack token', `xoxb-${digits(12)}-${digits(13)}-${alnum(24)}`),
    s('slack webhook', `hooks.slack.com/services/T${upper(8)}/B${upper(10)}/${alnum(24)}`, ''),
    s('sendgrid', `SG.${b64url(22)}.${b64url(43)}`),
    s('twilio api key', `SK${hex(32)}`),
    s('twilio auth token', hex(32), ''),
    s('telegram bot token', `${digits(10)}:AA${b64url(33)}`),
    s('npm', `npm_${alnum(36)}`),
    s('pypi', `pypi-AgEIcHlwaS5vcmc${b64url(70)}`),
    s('shopify', `shpat_${hex(32)}`),
    s('linear', `lin_api_${alnum(40)}`),
    s('doppler', `dp.pt.${alnum(43)}`),
    s('databricks', `dapi${hex(32)}`),
    s('digitalocean', `dop_v1_${hex(64)}`),
    s('heroku', `${hex(8)}-${hex(4)}-${hex(4)}-${hex(4)}-${hex(12)}`, ''),
    s('jwt', `eyJ${b64url(30)}.eyJ${b64url(60)}.${b64url(43)}`),
    s('pem private key', pemKey.split('\n')[3]!, pemKey),
    s('openssh private key', sshKey.split('\n')[2]!, sshKey),
    s('key body without its BEGIN line', keyBody.split('\n')[2]!, keyBody),
    s('url credentials', password, `postgres://app:${password}@db.internal:5432/prod`),
    s('basic auth header', basicAuth, `Authorization: Basic ${basicAuth}`),
    s('bearer header', b64url(40), ''),
    s('curl -u', `cu${alnum(14)}`, ''),
    s('--password flag', `pf${alnum(14)}`, ''),
    s('mysql -p', `my${alnum(14)}`, ''),
    s('.env assignment', `ev${alnum(20)}`, ''),
    s('yaml assignment', `ya${alnum(20)}`, ''),
    s('json assignment', `js${alnum(20)}`, ''),
    s('code assignment', `co${alnum(30)}`, ''),
    s('docker auths', dockerAuth, `{"auths":{"registry.example.com":{"auth":"${dockerAuth}"}}}`),
    s('aws credentials file', b64(40), ''),
    s('aws sts json', b64(40), ''),
    s('gcp service account json', hex(40), ''),
    s('redis url without a user', `rd${alnum(18)}`, ''),
    s('DB_PASS', `dp${alnum(18)}`, ''),
    s('signing key', `sg${alnum(30)}`, ''),
    s('encryption key', `en${alnum(30)}`, ''),
    s('quoted password with spaces', `correct horse ${alnum(10)} staple`, ''),
    s('go assignment', `go${alnum(24)}`, ''),
    s('sshpass -p', `ss${alnum(14)}`, ''),
    s('redis-cli -a', `rc${alnum(16)}`, ''),
    s('az login -p', `az${alnum(16)}`, ''),
    s('--token flag', `tk${alnum(30)}`, ''),
    s('okta', b64url(42), ''),
    s('kubeconfig token', alnum(48), ''),
    s('kubeconfig client-key-data', `${b64(88)}=`, ''),
    s('npm _auth', basic('ci', `np${alnum(16)}`), ''),
    s('google oauth client secret', `GOCSPX-${b64url(28)}`),
    s('atlassian', `ATATT3xFfGF0${b64url(60)}`),
    s('terraform cloud', `${alnum(14)}.atlasv1.${b64url(67)}`),
    s('discord bot token', `M${alnum(25)}.${b64url(6)}.${b64url(38)}`),
    s('discord webhook', b64url(68), ''),
    s('age', `AGE-SECRET-KEY-1${upper(58)}`),
    s('fcm server key', `AAAA${b64url(7)}:${b64url(140)}`)
  ].map((p) => (p.text === '' ? { ...p, text: contextFor(p.kind, p.secret) } : p))
}

/** How a secret whose shape alone is not enough shows up, with the name or flag that gives it away. */
function contextFor(kind: string, secret: string): string {
  switch (kind) {
    case 'aws key id':
      return `export AWS_ACCESS_KEY_ID=${secret}`
    case 'aws secret':
      return `aws_secret_access_key = ${secret}`
    case 'azure sas':
      return `https://acct.blob.core.windows.net/c?sp=r&st=2026-11-30&sig=${secret}`
    case 'slack webhook':
      return `curl -X POST https://${secret} -d '{"text":"deployed"}'`
    case 'twilio auth token':
      return `TWILIO_AUTH_TOKEN=${secret}`
    case 'heroku':
      return `HEROKU_API_KEY=${secret}`
    case 'bearer header':
      return `curl -H "Authorization: Bearer ${secret}" https://api.example.com/v1/me`
    case 'curl -u':
      return `curl -u deploy:${secret} https://ci.example.com/job/build`
    case '--password flag':
      return `pg_dump --password=${secret} -h db prod`
    case 'mysql -p':
      return `mysql -u root -p${secret} -h 127.0.0.1 shop`
    case '.env assignment':
      return `DB_PASSWORD=${secret}`
    case 'yaml assignment':
      return `  api_key: ${secret}`
    case 'json assignment':
      return `{"client_secret": "${secret}"}`
    case 'code assignment':
      return `SECRET_KEY = '${secret}'`
    case 'aws credentials file':
      return `[default]\naws_access_key_id = AKIA${upper(16)}\naws_secret_access_key=${secret}\nregion = eu-west-1`
    case 'aws sts json':
      return `{\n  "Credentials": {\n    "AccessKeyId": "ASIA${upper(16)}",\n    "SecretAccessKey": "${secret}",\n    "Expiration": "2026-12-01T12:00:00Z"\n  }\n}`
    case 'gcp service account json':
      return `{\n  "type": "service_account",\n  "project_id": "demo-1234",\n  "private_key_id": "${secret}",\n  "client_email": "ci@demo-1234.iam.gserviceaccount.com"\n}`
    case 'redis url without a user':
      return `REDIS_URL=redis://:${secret}@cache.internal:6379/0`
    case 'DB_PASS':
      return `DB_HOST=db\nDB_PASS=${secret}`
    case 'signing key':
      return `JWT_SIGNING_KEY=${secret}`
    case 'encryption key':
      return `ENCRYPTION_KEY: ${secret}`
    case 'quoted password with spaces':
      return `password = "${secret}"`
    case 'go assignment':
      return `\tapiToken := "${secret}"`
    case 'sshpass -p':
      return `sshpass -p ${secret} ssh deploy@10.0.0.5 'systemctl restart app'`
    case 'redis-cli -a':
      return `redis-cli -h cache.internal -a ${secret} ping`
    case 'az login -p':
      return `az login -u ops@example.com -p ${secret}`
    case '--token flag':
      return `deployctl push --token ${secret} --env prod`
    case 'okta':
      return `curl -H "Authorization: SSWS ${secret}" https://example.okta.com/api/v1/users`
    case 'kubeconfig token':
      return `users:\n- name: ci\n  user:\n    token: ${secret}`
    case 'kubeconfig client-key-data':
      return `users:\n- name: admin\n  user:\n    client-key-data: ${secret}`
    case 'npm _auth':
      return `//registry.npmjs.org/:_auth=${secret}\nalways-auth=true`
    case 'discord webhook':
      return `https://discord.com/api/webhooks/${digits(18)}/${secret}`
    default:
      return secret
  }
}
