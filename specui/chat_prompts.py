"""Prompts the project writes for its chat model: training prompts for self-distillation (the target
answers them and the draft learns from those answers) and held-out prompts for the benchmark.

Two training sets: `training_prompts` (code tasks in nine languages, topics, a little chat) and
`extra_prompts` (everyday questions and messages, Python tasks); each has its own answers folder. A third,
`library_prompts`, asks about the Python standard library's own modules and functions, read from the running
interpreter (its size follows the Python version; its order is fixed for one). A fourth and a fifth,
`everyday_prompts` and `fresh_prompts`, ask more of what the second showed counts, on new subjects; a sixth,
`wide_prompts`, spreads over hundreds of subjects a few prompts each (`specui.chat_wide`).
The held-out prompts share no task or topic with either (tests/unit/test_chat_prompts.py checks that no
held-out subject appears in any training prompt), so acceptance measured on them is not flattered by
memorised answers; common phrasings ("Write a Python function that ...") are shared, as in real use.
"""

from __future__ import annotations

import itertools
import random

from specui.chat_wide import WIDE, WIDE_FORMS, WIDE_PYTHON_FORMS, WIDE_PYTHON_TASKS

CODE_TASKS = [
    "reverses the words in a sentence", "checks whether a number is prime", "merges two sorted lists",
    "counts the vowels in a string", "returns the n-th Fibonacci number", "flattens a nested list",
    "removes duplicates from a list while keeping the order", "computes the factorial of n",
    "finds the largest element of a list", "converts Celsius to Fahrenheit", "checks if a string is a palindrome",
    "reads a CSV file and returns its rows as dictionaries", "computes the greatest common divisor of two numbers",
    "sorts a list of dictionaries by a key", "returns the mean and median of a list of numbers",
    "implements binary search", "counts how often each word appears in a text", "transposes a matrix",
    "validates an email address with a regular expression", "generates all permutations of a string",
    "implements a stack class with push, pop and peek", "implements a queue using two stacks",
    "parses a date string and returns the weekday", "computes the sum of the digits of a number",
    "splits a list into chunks of size n", "finds the intersection of two lists",
    "returns the longest common prefix of a list of strings", "checks whether two strings are anagrams",
    "converts a Roman numeral to an integer", "implements bubble sort", "implements merge sort",
    "implements quicksort", "rotates a list by k positions", "finds the second largest number in a list",
    "downloads a web page with the requests library", "writes a dictionary to a JSON file",
    "computes the distance between two points", "checks whether a year is a leap year",
    "capitalizes the first letter of every word", "returns the prime factors of a number",
    "implements a simple linked list", "finds the missing number in a list from 1 to n",
    "counts the lines in a text file", "converts a list of tuples into a dictionary",
    "computes compound interest", "implements a binary tree with insert and search",
    "removes all whitespace from a string", "finds all files with a given extension in a folder",
    "measures how long a function takes to run", "implements a least-recently-used cache",
    "checks whether parentheses in a string are balanced", "computes the power set of a set",
    "returns the running total of a list", "converts a number to binary", "shuffles a list",
    "groups a list of words by their first letter", "computes the dot product of two vectors",
    "implements the sieve of Eratosthenes", "formats a number with thousands separators",
]
CODE_LANGUAGES = ["Python", "Python", "Python", "JavaScript", "C", "Rust", "Go", "Java", "Bash"]
CODE_FORMS = [
    "Write a {lang} function that {task}.",
    "How do I write a {lang} program that {task}?",
    "Show me {lang} code that {task}, with a short explanation.",
    "Can you write a {lang} function that {task} and add comments?",
    "Write a {lang} function that {task}. Include an example of how to call it.",
]
TOPICS = [
    "photosynthesis", "the water cycle", "gravity", "black holes", "the French Revolution", "inflation",
    "machine learning", "neural networks", "the immune system", "climate change", "the stock market",
    "democracy", "the Roman Empire", "volcanoes", "earthquakes", "DNA", "vaccines", "electricity",
    "the internet", "encryption", "blockchain", "recursion in programming", "object-oriented programming",
    "version control with git", "the theory of evolution", "the solar system", "renewable energy",
    "supply and demand", "the human heart", "sleep", "meditation", "the Renaissance", "World War I",
    "the printing press", "plate tectonics", "the ozone layer", "antibiotics", "compilers", "databases",
    "operating systems", "the speed of light", "quantum computing", "the moon landing", "bees",
    "rainbows", "tides", "the Great Wall of China", "coffee", "chess", "the Olympic Games",
    "hash tables", "sorting algorithms", "REST APIs", "cloud computing", "the TCP/IP model",
]
TOPIC_FORMS = [
    "Explain {topic} in simple terms.", "What is {topic}?", "Give me three interesting facts about {topic}.",
    "Explain {topic} to a ten-year-old.", "Write a short paragraph about {topic}.",
    "What are the main ideas behind {topic}?", "Summarize the history of {topic} in a few sentences.",
]
CHAT = [
    "How can I improve my sleep?", "What should I pack for a weekend camping trip?",
    "Give me some tips for learning a new language.", "How do I make a good cup of tea?",
    "What are some healthy breakfast ideas?", "Write a short poem about the ocean.",
    "Write a haiku about autumn.", "Suggest a name for a small bakery.", "How do I stay focused while studying?",
    "Write a thank-you note to a friend who helped me move.", "What are the benefits of regular exercise?",
    "How can I save money on groceries?", "Write a short story about a robot who learns to paint.",
    "Give me a recipe for a simple pasta dish.", "What is a good way to start a job interview answer?",
    "How do I write a good resume?", "What are some fun things to do on a rainy day?",
    "Write an email asking my manager for a day off.", "How do plants know which way is up?",
    "What are some good habits for a productive morning?", "Write a limerick about a cat.",
    "How do I care for a houseplant?", "What are the pros and cons of working from home?",
    "Give me five ideas for a birthday party.", "How do I politely decline an invitation?",
    "Write a motivational message for a friend running a marathon.", "What is the difference between weather and climate?",
    "Describe a sunset in three sentences.", "How can I be a better listener?", "What should I consider when buying a laptop?",
]

# A second training set (`extra_prompts`), written after the first answers showed the gap: the first set is
# mostly code in nine languages, while people mostly chat and ask for Python. Everyday questions, messages
# and explanations, and more Python tasks; none of them touches a held-out subject either.
EVERYDAY_FORMS = {
    "tips": ["What are some tips for {x}?", "I'm new to {x}. Where should I start?", "What mistakes do beginners make when {x}?"],
    "how": ["How does {x} work?", "Can you explain how {x} works, step by step?"],
    "why": ["Why {x}?", "Is there a simple explanation for why {x}?"],
    "write": ["Write {x}.", "Help me write {x}. Keep it short and warm."],
    "compare": ["How are {x} different?", "Compare {x} in a few sentences."],
    "advice": ["How can I {x}?", "Any advice on how to {x}?"],
}
EVERYDAY = {
    "tips": ["running a first 5k race", "baking bread at home", "training a puppy", "painting a bedroom",
             "taking better photos with a phone", "public speaking", "moving to a new city", "cooking rice",
             "keeping a journal", "planning a road trip", "learning to swim", "decorating a small apartment",
             "hosting a dinner party", "writing a cover letter", "studying for a big exam", "starting a podcast",
             "knitting", "caring for a new kitten", "traveling on a budget", "making homemade pizza"],
    "how": ["a refrigerator", "a microwave oven", "a thermostat", "a digital camera", "a lock and key", "a compass",
            "an elevator", "a washing machine", "a rechargeable battery", "a solar panel", "a car engine",
            "a touchscreen", "a zipper", "a hot air balloon", "a submarine", "a credit card payment", "GPS navigation",
            "noise-cancelling headphones", "a 3D printer", "a vending machine"],
    "why": ["the sky looks blue", "bread goes stale", "ice floats on water", "cats purr", "we yawn",
            "onions make people cry", "the sea tastes salty", "stars twinkle", "we get goosebumps", "metal feels cold",
            "popcorn pops", "we dream", "the moon has phases", "some people are left-handed", "music gives us chills",
            "bubbles are round", "coffee keeps people awake", "hair turns grey", "dogs wag their tails", "snow is white"],
    "write": ["a note thanking a teacher for a great school year", "an apology to a friend for missing their party",
              "a text asking a coworker to swap shifts", "a welcome message for a new member of a book club",
              "a reminder to my roommates about the cleaning schedule", "a congratulations card for a wedding",
              "a short speech for my sister's graduation", "a get-well-soon message for a colleague",
              "a polite complaint about a late delivery", "a toast for my parents' anniversary",
              "a product description for handmade candles", "a short bio for a conference website",
              "a farewell message for a coworker who is retiring", "a post announcing a lost cat in the neighbourhood",
              "a message asking my landlord to fix the heating", "a review of a cosy little restaurant"],
    "compare": ["a crocodile and an alligator", "baking soda and baking powder", "a lake and a pond",
                "a hurricane and a tornado", "a latte and a cappuccino", "a rabbit and a hare", "a frog and a toad",
                "a laptop and a tablet", "renting and buying a home", "a debit card and a credit card",
                "an ocean and a sea", "a butterfly and a moth"],
    "advice": ["stop procrastinating", "make friends as an adult", "remember names better", "drink more water",
               "spend less time on my phone", "keep my desk organised", "fall asleep faster", "handle criticism at work",
               "stay motivated to exercise", "cook healthy meals on a budget", "prepare for a long flight",
               "negotiate a higher salary", "become a morning person", "calm down before an exam"],
}
PYTHON_TASKS = [
    "returns the longest word in a sentence", "counts the uppercase letters in a string", "removes the vowels from a string",
    "returns every other element of a list", "checks whether all elements of a list are unique",
    "reverses a dictionary so values become keys", "finds the index of the smallest element", "pads a string to a width",
    "converts a list of strings to integers, skipping bad values", "returns the cumulative product of a list",
    "checks whether a number is a perfect square", "computes the area of a circle", "merges two dictionaries",
    "finds pairs in a list that add up to a target", "counts the words in a file", "returns the last n lines of a file",
    "builds a frequency table of letters", "removes None values from a list", "converts snake_case to camelCase",
    "checks whether a string contains only digits", "computes the average of the values in a dictionary",
    "returns the digits of a number as a list", "finds the longest run of equal elements", "interleaves two lists",
    "implements a countdown timer", "truncates a string and adds an ellipsis", "computes a moving average",
    "replaces every number in a text with its double", "returns the keys of a dictionary sorted by value",
    "checks whether a point lies inside a rectangle", "generates a random password", "simulates rolling two dice",
    "converts hours and minutes to minutes", "computes the Hamming distance of two strings",
    "finds the first repeated word in a sentence", "returns a list without its first and last elements",
]
PYTHON_FORMS = ["Write a Python function that {task}.", "Write a short Python function that {task}, with a docstring.",
                "Show me a Python function that {task} and a quick test of it.",
                "Write a Python script that {task} and prints the result."]

# Held out: other tasks, other topics, other phrasings.
HELD_OUT_CHAT = [
    "What are some tips for keeping a vegetable garden healthy in summer?",
    "Describe how a bicycle works.",
    "Write a short, friendly message inviting my neighbours to a picnic.",
    "Why do leaves change colour in the fall?",
    "What is the difference between a virus and a bacterium?",
    "Give me a plan for learning to play the guitar as an adult.",
    "Explain how airplanes stay in the air.",
    "What makes a good team leader?",
]
HELD_OUT_CODE = [
    "Write a Python function that returns the number of days between two dates.",
    "Write a Python class for a bank account with deposit and withdraw methods.",
    "Write a Python function that finds the most common character in a string.",
    "Write a Python script that prints a multiplication table from 1 to 10.",
    "Write a Python function that checks whether a list is sorted.",
    "Write a Python function that converts a string to title case without using str.title.",
    "Write a Python generator that yields the squares of the numbers from 1 to n.",
    "Write a Python function that computes the median of three numbers.",
]
HELD_OUT = [p for pair in zip(HELD_OUT_CHAT, HELD_OUT_CODE) for p in pair]  # chat, code, chat, code…
HELD_OUT_SUBJECTS = ["vegetable garden", "bicycle", "picnic", "leaves change colour", "virus", "guitar", "airplanes",
                     "team leader", "days between", "bank account", "most common character", "multiplication table",
                     "is sorted", "title case", "squares", "median of three"]


def training_prompts(*, seed: int = 0) -> list[str]:
    """Every training prompt (code tasks x languages x forms, topics x forms, chat), shuffled."""
    prompts = [form.format(lang=lang, task=task) for task, lang, form in itertools.product(CODE_TASKS, CODE_LANGUAGES, CODE_FORMS)]
    prompts += [form.format(topic=topic) for topic, form in itertools.product(TOPICS, TOPIC_FORMS)]
    prompts += CHAT
    prompts = sorted(set(prompts))
    random.Random(seed).shuffle(prompts)
    return prompts


def extra_prompts(*, seed: int = 0) -> list[str]:
    """The second training set (everyday questions and messages, and Python tasks), shuffled; written to its
    own answers folder (`python -m specui.train.chat --write-answers DIR --prompt-set extra`)."""
    prompts = [form.format(x=x) for kind, subjects in EVERYDAY.items() for x, form in
               itertools.product(subjects, EVERYDAY_FORMS[kind])]
    prompts += [form.format(task=task) for task, form in itertools.product(PYTHON_TASKS, PYTHON_FORMS)]
    prompts = sorted(set(prompts))
    random.Random(seed).shuffle(prompts)
    return prompts


# The third set: questions about the standard library, its names read from the interpreter offline.
LIBRARY_MODULES = """os os.path sys re json csv math random collections itertools functools pathlib shutil subprocess
argparse logging unittest string textwrap time heapq bisect fractions decimal hashlib base64 zipfile gzip sqlite3
urllib.parse urllib.request uuid pickle copy enum dataclasses typing threading queue socket glob tempfile pprint
operator contextlib abc struct array secrets difflib configparser platform io traceback inspect timeit doctest
xml.etree.ElementTree html email.message smtplib zlib tarfile signal asyncio concurrent.futures weakref fnmatch shlex
colorsys http.client http.server urllib.error unicodedata locale getpass webbrowser cmath numbers codecs binascii
filecmp gettext mimetypes ipaddress selectors multiprocessing sched graphlib""".split()
LIBRARY_NAME_FORMS = ["What does {name} do in Python?", "Show me how to use {name} in Python, with a short example.",
                      "Explain Python's {name} with an example.", "When should I use {name} in Python?",
                      "Write a small Python example that uses {name}.", "What is {name} in Python and how is it used?"]
LIBRARY_MODULE_FORMS = ["What is the Python {name} module used for?", "Give me a quick tour of Python's {name} module.",
                        "Write a small Python script that uses the {name} module.",
                        "What are the most useful functions in Python's {name} module?"]
LIBRARY_AVOID = ("median", "title", "sort", "square", "most_common", "days", "date", "calendar")  # near held-out tasks


def library_names() -> list[str]:
    """Public documented functions and classes of LIBRARY_MODULES, as `module.name` (modules that fail to
    import are skipped), with the modules themselves."""
    import importlib
    import inspect

    names = []
    for module in LIBRARY_MODULES:
        try:
            mod = importlib.import_module(module)
        except ImportError:  # e.g. a build without sqlite3
            continue
        names.append(module)
        for name in sorted(set(getattr(mod, "__all__", None) or dir(mod))):
            obj = getattr(mod, name, None)
            if (not name.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj) or inspect.isbuiltin(obj))
                    and (obj.__doc__ or "").strip()):
                names.append(f"{module}.{name}")
    return [n for n in names if not any(word in n.lower() for word in LIBRARY_AVOID)]


def library_prompts(*, seed: int = 0) -> list[str]:
    """The third training set: two questions about each documented standard-library name (forms taken in
    turn) and every module form, shuffled; its own answers folder (`--prompt-set library`)."""
    prompts = []
    for i, name in enumerate(library_names()):
        if "." in name and name.rsplit(".", 1)[0] in LIBRARY_MODULES:  # module.name
            prompts += [LIBRARY_NAME_FORMS[(2 * i + j) % len(LIBRARY_NAME_FORMS)].format(name=name) for j in range(2)]
        else:
            prompts += [form.format(name=name) for form in LIBRARY_MODULE_FORMS]
    prompts = sorted(set(prompts))
    random.Random(seed).shuffle(prompts)
    return prompts


# The fourth set (`everyday_prompts`): more of what the second set showed counts (everyday questions, plans,
# messages and Python tasks), on new subjects; none of them near a held-out subject.
MORE_EVERYDAY = {
    "tips": ["learning to cook for one", "keeping houseplants alive indoors", "starting to run in winter",
             "writing a first novel", "learning a new language at 40", "organising a small wedding", "brewing tea",
             "taking care of a fish tank", "saving money on groceries", "staying focused while working from home",
             "making friends in a new town", "growing tomatoes on a balcony", "camping with children",
             "learning to draw", "sleeping well in hot weather", "preparing for a job interview"],
    "how": ["a microwave oven", "a lock and key", "a thermostat", "a compass", "a smoke detector", "an escalator",
            "a wind turbine", "a refrigerator", "a camera lens", "Wi-Fi", "a barcode scanner", "an electric kettle",
            "a parachute", "a hearing aid", "a dishwasher", "a traffic light"],
    "why": ["the sky turns red at sunset", "cats purr", "bread goes stale", "we yawn", "ice floats on water",
            "the ocean has tides", "some people snore", "onions caramelise when cooked slowly", "birds fly south",
            "we get hiccups", "old books smell the way they do", "rainbows are curved", "cheese has holes",
            "our ears pop on a mountain road", "fruit turns brown when cut", "thunder follows lightning"],
    "write": ["a thank-you note to a teacher", "a short birthday message for my grandmother",
              "an email asking for a day off next Friday", "a note apologising for missing a meeting",
              "an invitation to a board game night", "a message welcoming a new colleague to the team",
              "a short speech for a retirement party", "a reply declining a wedding invitation politely",
              "a post asking neighbours to keep the hallway quiet at night", "a recommendation for a former intern",
              "a message to a friend who just moved abroad", "a short review of a mystery novel"],
    "compare": ["tea and coffee", "a crocodile and an alligator", "weather and climate", "a lake and a pond",
                "a violin and a viola", "baking soda and baking powder", "a city and a town", "jam and jelly",
                "a dolphin and a porpoise", "a comet and an asteroid", "a novel and a novella", "sleet and hail"],
    "advice": ["stop procrastinating", "drink more water during the day", "read more books", "cook faster on weeknights",
               "keep my inbox under control", "learn to touch type", "remember people's names",
               "stay calm in traffic", "save for a holiday", "make my mornings less rushed"],
    "plan": ["learning to swim as an adult", "running a half marathon in three months", "learning to bake cakes",
             "reading twelve books this year", "learning basic French before a trip", "getting fit at home"],
    "qualities": ["a good teacher", "a good neighbour", "a good friend", "a good presentation", "a good cover photo",
                  "a good night's sleep", "a good coffee shop", "a good password"],
}
MORE_FORMS = {**EVERYDAY_FORMS,
              "plan": ["Give me a plan for {x}.", "Make me a weekly plan for {x}."],
              "qualities": ["What makes {x}?", "In a few points, what makes {x}?"]}
MORE_PYTHON_TASKS = [
    "returns the second largest number in a list", "counts the words in a text file", "flattens a nested list",
    "removes duplicate items from a list while keeping their order", "checks whether a string is a palindrome",
    "converts Celsius to Fahrenheit", "returns the factorial of a number",
    "counts how many times each word appears in a sentence", "checks whether a year is a leap year",
    "reverses the words in a sentence", "returns the first n prime numbers", "splits a list into chunks of size n",
    "computes the average of a list of numbers", "capitalises the first letter of every sentence",
    "finds all the even numbers in a list", "returns the sum of the digits of a number", "rotates a list by k places",
    "checks whether two strings are anagrams", "converts a binary string to an integer",
    "returns the longest common prefix of a list of strings", "counts the vowels in a string",
    "generates a random password of a given length", "returns the intersection of two lists",
    "finds the missing number in a list of 1 to n", "converts a number to Roman numerals",
    "returns the n-th Fibonacci number", "checks whether a string contains only digits",
    "removes all the whitespace from a string", "returns the keys of a dictionary sorted by their values",
    "computes the greatest common divisor of two numbers", "reads a CSV file and prints each row",
    "counts the lines in a text file", "returns a list of the numbers from 1 to n that are divisible by 3 or 5",
    "merges two sorted lists into one sorted list", "checks whether a number is prime",
    "converts a dictionary to a list of pairs",
    "finds the shortest word in a list", "swaps the keys and values of a dictionary",
    "returns the product of all the numbers in a list", "truncates a string to n characters with an ellipsis",
    "builds a dictionary from two lists", "returns the difference between the largest and smallest numbers",
    "checks whether a string starts with a capital letter", "simulates rolling two dice",
    "returns the number of digits in an integer", "converts kilometres to miles",
    "finds the positions of a letter in a string", "returns a string repeated n times with spaces between",
]
MORE_PYTHON_FORMS = [*PYTHON_FORMS, "Write a small Python program that {task}.",
                     "Can you write a Python function that {task}? Explain it briefly."]


def everyday_prompts(*, seed: int = 0) -> list[str]:
    """The fourth set: everyday questions, plans and messages and Python tasks on new subjects, shuffled; its
    own answers folder (`--prompt-set everyday`)."""
    prompts = [form.format(x=x) for kind, subjects in MORE_EVERYDAY.items() for x, form in
               itertools.product(subjects, MORE_FORMS[kind])]
    prompts += [form.format(task=task) for task, form in itertools.product(MORE_PYTHON_TASKS, MORE_PYTHON_FORMS)]
    prompts = sorted(set(prompts) - set(training_prompts() + extra_prompts()))
    random.Random(seed).shuffle(prompts)
    return prompts


# The fifth set (`fresh_prompts`): the fourth's kinds on subjects no earlier set names, and Python tasks on
# strings, files, dates-free arithmetic and small classes; none of them near a held-out subject.
FRESH = {
    "tips": ["repainting an old chair", "learning to juggle", "packing for a week at the beach", "making sourdough",
             "playing chess better", "writing thank-you cards", "keeping a small aquarium clean", "ice skating",
             "starting a book club", "cooking for a crowd", "learning to sew", "taking notes in lectures"],
    "how": ["a pressure cooker", "a lighthouse", "a sewing machine", "a dam", "a rice cooker", "a metal detector",
            "an air conditioner", "a printer", "a toaster", "a radio", "a bar code", "a fire extinguisher"],
    "why": ["cats land on their feet", "bees make honey", "the desert is cold at night", "glass is transparent",
            "owls hunt at night", "mirrors flip left and right", "we shiver when cold", "apples float",
            "the wind blows", "soap cleans", "leaves are green", "ships float"],
    "write": ["a short poem about autumn rain", "a note asking my neighbour to water my plants",
              "an email inviting the team to a Friday lunch", "a message congratulating a friend on a new job",
              "a short story about a lost umbrella", "an out-of-office reply for a two-week holiday",
              "a thank-you message after a job interview", "a short ad for a used sofa",
              "a note to a child's teacher about a dentist appointment", "a limerick about a sleepy cat"],
    "compare": ["a cello and a double bass", "a mountain and a hill", "a river and a stream", "a sheep and a goat",
                "a cake and a muffin", "a hawk and an eagle", "a sweater and a cardigan", "a poem and a song"],
    "advice": ["keep a plant alive in a dark room", "save money on electricity", "learn to say no politely",
               "pack a healthy lunch", "keep in touch with old friends", "write clearer emails"],
    "plan": ["a relaxing weekend at home", "cleaning out a garage", "a first week of learning Python",
             "a child's birthday party", "a day trip to the seaside"],
    "qualities": ["a good meeting", "a good recipe", "a good mentor", "a good first chapter", "a good apology"],
}
FRESH_PYTHON_TASKS = [
    "counts the sentences in a paragraph", "returns the initials of a full name", "masks all but the last four digits",
    "checks whether brackets in a string are balanced", "returns the most frequent word in a list",
    "groups words by their first letter", "converts a list of numbers to a comma-separated string",
    "finds the largest value in a nested list", "removes punctuation from a string", "compresses repeated letters",
    "returns the running total of a list", "checks whether a list is a palindrome", "finds the mode of a list",
    "formats a number with thousands separators", "returns the unique words of a text in order",
    "counts the characters in a file", "writes a list of lines to a file", "returns every third character",
    "converts a temperature table from Fahrenheit to Celsius", "implements a simple stack class",
    "implements a queue class with enqueue and dequeue", "returns True if a number is a power of two",
    "finds the longest word in a file", "computes simple interest",
]


def fresh_prompts(*, seed: int = 0) -> list[str]:
    """The fifth set: the fourth's kinds of question on new subjects and new Python tasks, shuffled; its own
    answers folder (`--prompt-set fresh`)."""
    prompts = [form.format(x=x) for kind, subjects in FRESH.items() for x, form in
               itertools.product(subjects, MORE_FORMS[kind])]
    prompts += [form.format(task=task) for task, form in itertools.product(FRESH_PYTHON_TASKS, MORE_PYTHON_FORMS)]
    prompts = sorted(set(prompts) - set(training_prompts() + extra_prompts() + everyday_prompts()))
    random.Random(seed).shuffle(prompts)
    return prompts


def wide_prompts(*, seed: int = 0) -> list[str]:
    """The sixth set: hundreds of subjects, two forms each, and Python tasks (`specui.chat_wide`), shuffled;
    its own answers folder (`--prompt-set wide`)."""
    prompts = [form.format(x=x) for kind, subjects in WIDE.items() for x, form in itertools.product(subjects, WIDE_FORMS[kind])]
    prompts += [form.format(task=t) for t, form in itertools.product(WIDE_PYTHON_TASKS, WIDE_PYTHON_FORMS)]
    earlier = training_prompts() + extra_prompts() + everyday_prompts() + fresh_prompts()
    prompts = sorted(set(prompts) - set(earlier))
    random.Random(seed).shuffle(prompts)
    return prompts


PROMPT_SETS = {"main": training_prompts, "extra": extra_prompts, "library": library_prompts,
               "everyday": everyday_prompts, "fresh": fresh_prompts, "wide": wide_prompts}
