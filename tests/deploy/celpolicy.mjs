// SPDX-License-Identifier: Apache-2.0
// celpolicy.py's evaluator: node celpolicy.mjs CEL_JS_DIR < {spec, cases} > [result, ...].
// CEL_JS_DIR holds node_modules/@marcbachmann/cel-js. Each case is {request, object,
// oldObject, namespaceObject}; its result is what the API server's CEL steps give:
//   match: true, false, or {error} (the matchConditions, in order, without `variables`)
//   validations: [{ok: true} | {ok: false, message, reason} | {error}], all of them, in order.
// Variables are evaluated lazily, once a case, on first use by name; a variable sees only the
// ones declared before it (the API server refuses a policy that names a later one), and its
// error is the error of each expression that uses it. What the results mean (failurePolicy,
// the binding's actions) celpolicy.py decides.
import {createRequire} from 'node:module'
import {join} from 'node:path'
import {pathToFileURL} from 'node:url'

const celDir = process.argv[2]
const entry = createRequire(join(celDir, 'package.json')).resolve('@marcbachmann/cel-js')
const {evaluate} = await import(pathToFileURL(entry).href)

function variables (spec, base) {
  const decls = spec.variables || []
  const cache = new Map()
  // views[i]: what variable i may name (those before it); views[decls.length]: the rest.
  const views = decls.map(() => ({}))
  views.push({})
  decls.forEach((v, i) => {
    const get = () => {
      if (!cache.has(v.name)) {
        try {
          cache.set(v.name, {value: evaluate(v.expression, {...base, variables: views[i]})})
        } catch (e) {
          cache.set(v.name, {error: e.message})
        }
      }
      const c = cache.get(v.name)
      if ('error' in c) throw new Error(`variables.${v.name}: ${c.error}`)
      return c.value
    }
    for (let j = i + 1; j < views.length; j++)
      Object.defineProperty(views[j], v.name, {enumerable: true, get})
  })
  return views[decls.length]
}

function message (v, ctx) {
  if (v.messageExpression) {
    try {
      const m = evaluate(v.messageExpression, ctx)
      // The API server drops an empty, blank or multi-line message, as it drops an error.
      if (typeof m === 'string' && m.trim() !== '' && !m.includes('\n')) return m
    } catch (e) {}
  }
  return v.message || `failed expression: ${v.expression.trim()}`
}

function decide (spec, c) {
  const base = {request: c.request, object: c.object, oldObject: c.oldObject,
                namespaceObject: c.namespaceObject, params: null}
  let matchError = null
  for (const m of spec.matchConditions || []) {
    let r
    try {
      r = evaluate(m.expression, base)
    } catch (e) {
      matchError = matchError || `matchCondition ${m.name}: ${e.message}`
      continue
    }
    if (r === false) return {match: false, validations: []}
    if (r !== true && !matchError)
      matchError = `matchCondition ${m.name}: ${JSON.stringify(r)}, not a bool`
  }
  if (matchError) return {match: {error: matchError}, validations: []}
  const ctx = {...base, variables: variables(spec, base)}
  return {
    match: true,
    validations: (spec.validations || []).map(v => {
      let r
      try {
        r = evaluate(v.expression, ctx)
      } catch (e) {
        return {error: e.message}
      }
      if (r === true) return {ok: true}
      if (r !== false) return {error: `${JSON.stringify(r)}, not a bool`}
      return {ok: false, message: message(v, ctx), reason: v.reason || 'Invalid'}
    })
  }
}

let input = ''
process.stdin.on('data', d => { input += d })
process.stdin.on('end', () => {
  const {spec, cases} = JSON.parse(input)
  console.log(JSON.stringify(cases.map(c => decide(spec, c))))
})
