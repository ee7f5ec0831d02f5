/** The service's defaults: src/contract/defaults.ts holds every default in one place. */
export { DEFAULT_BUDGET_TOKENS } from '../contract/defaults.js'
