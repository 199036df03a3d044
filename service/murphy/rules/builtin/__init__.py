"""murphy's built-in rules: one module per rule, named and parameterised as SageMaker's.

Import a rule from its module (``murphy.rules.builtin.exploding_tensor.ExplodingTensor``); this
package imports nothing eagerly so that one rule container loads only the rule it runs.
"""
