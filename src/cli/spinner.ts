/** A spinner with the elapsed time, on stderr, only when stderr is a terminal. */
export function startSpinner(label: string, stream: NodeJS.WriteStream = process.stderr): () => void {
  if (!stream.isTTY) return () => undefined
  const frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏']
  const started = Date.now()
  let i = 0
  const draw = (): void => {
    stream.write(`\r${frames[i++ % frames.length]} ${label} ${((Date.now() - started) / 1_000).toFixed(1)}s`)
  }
  draw()
  const timer = setInterval(draw, 100)
  return () => {
    clearInterval(timer)
    stream.write('\r\x1b[K')
  }
}
