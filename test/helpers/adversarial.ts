/**
 * Lines built to make a redaction pattern work hard: each pattern's prefix (or a secret's name) repeated
 * with nothing that completes it, a separator or a quote opened and never closed, runs of what a value may
 * hold. A pattern that rescans the rest of the line from every start is quadratic on these; a linear one
 * is not. `chars`: about how long the line is.
 */
export const ADVERSARIAL_LINES: Readonly<Record<string, (chars: number) => string>> = {
  'curl repeated': (n) => 'curl '.repeat(n / 5),
  'mysql repeated': (n) => 'mysql '.repeat(n / 6),
  'redis-cli repeated': (n) => 'redis-cli '.repeat(n / 10),
  'az login repeated': (n) => 'az login '.repeat(n / 9),
  'BEGIN PRIVATE KEY repeated': (n) => '-----BEGIN PRIVATE KEY-----'.repeat(n / 27),
  'a name run (passwordpassword…)': (n) => 'password'.repeat(n / 8),
  'a name run (token_token_…)': (n) => 'token_'.repeat(n / 6),
  'an assignment never ended': (n) => `password=${'a'.repeat(n)}`,
  'a quote never closed': (n) => `password="${'a'.repeat(n)}`,
  'userinfo repeated (://a:)': (n) => '://a:'.repeat(n / 5),
  'userinfo never ended': (n) => `http://u:${'b'.repeat(n)}`,
  'Bearer repeated': (n) => 'Bearer '.repeat(n / 7),
  '--password repeated': (n) => '--password '.repeat(n / 11),
  '--token repeated': (n) => '--token '.repeat(n / 8),
  'key body lines': (n) => `${'Qz9'.repeat(22)}\n`.repeat(n / 67),
  'Discord-shaped parts': (n) => `M${'a'.repeat(30)}.`.repeat(n / 32),
  'SG. repeated': (n) => 'SG.'.repeat(n / 3),
  'SSWS then blanks': (n) => `SSWS${' '.repeat(n)}`,
  'Telegram-shaped ids': (n) => '123456789:AA'.repeat(n / 12),
  'secret: repeated': (n) => 'secret: '.repeat(n / 8),
  'sig= repeated': (n) => '&sig='.repeat(n / 5),
  '"auth" repeated': (n) => '"auth" '.repeat(n / 7),
  'basic repeated': (n) => 'basic '.repeat(n / 6),
  'a separator run (api_key====…)': (n) => `api_key${'='.repeat(n)}`,
  'a name then blanks': (n) => `password${' '.repeat(n)}x`
}
