/** The server's entry point (npm start, the image's CMD). */
import { serveOrExit } from './serve.js'

serveOrExit()
