/** Secrets planted in test histories: one of each kind the service promises to redact, and a text holding them all. */
export const PLANTED_SECRETS: Record<string, string> = {
  aws_access_key: 'AKIAIOSFODNN7EXAMPLE',
  github_token: 'ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789',
  github_pat: 'github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz',
  anthropic_key: 'sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0',
  openai_key: 'sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz012345',
  slack_token: 'xoxb-123456789012-abcdefghijkl',
  jwt: 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U',
  private_key: '-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1234567890abcdef\n-----END RSA PRIVATE KEY-----',
  url_password: 'hunter2secretpw',
  password_assignment: 'S3cr3tPassw0rd!',
  secret_yaml: 'yamlSecretValue42'
}

export function plantedText(): string {
  const s = PLANTED_SECRETS
  return [
    `aws key ${s.aws_access_key}`,
    `token ${s.github_token} and ${s.github_pat}`,
    `export ANTHROPIC_API_KEY=${s.anthropic_key}`,
    `openai: ${s.openai_key}`,
    `slack ${s.slack_token}`,
    `Authorization: Bearer ${s.jwt}`,
    s.private_key,
    `git clone https://deploy:${s.url_password}@example.com/repo.git`,
    `password=${s.password_assignment}`,
    `client_secret: ${s.secret_yaml}`
  ].join('\n')
}
