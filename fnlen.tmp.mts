import ts from 'typescript'
import { readFileSync } from 'node:fs'
for (const file of process.argv.slice(2)) {
  const src = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true)
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node) || ts.isArrowFunction(node) || ts.isFunctionExpression(node) || ts.isConstructorDeclaration(node)) {
      const start = src.getLineAndCharacterOfPosition(node.getStart()).line
      const end = src.getLineAndCharacterOfPosition(node.getEnd()).line
      const name = (node as ts.FunctionDeclaration).name?.getText() ?? (ts.isArrowFunction(node) && ts.isVariableDeclaration(node.parent) ? node.parent.name.getText() : '(anonymous)')
      if (end - start + 1 > 60) console.log(`${file}:${start + 1} ${name} ${end - start + 1}`)
    }
    ts.forEachChild(node, visit)
  }
  visit(src)
}
