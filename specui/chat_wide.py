"""Subjects of the sixth training set (`specui.chat_prompts.wide_prompts`): many subjects, few prompts each.

The draft's teacher-forced acceptance was 0.84 on answers to prompts it trained on, 0.62 on new prompts
in the same styles and 0.53 on the held-out set (2026-11-26): it learns the answers it saw better than
the target's ways in general, and the one set on new subjects moved it most. So this set spreads over
hundreds of subjects, a few prompts each. None names a held-out subject (tests/unit/test_chat_prompts.py).
Each kind's subjects are one space-separated string, "_" joining the words of one subject.
"""

from __future__ import annotations


def _subjects(text: str) -> list[str]:
    return [s.replace("_", " ") for s in text.split()]


WIDE = {kind: _subjects(text) for kind, text in {
    "tips": """
        keeping_a_car_clean learning_to_knit hosting_a_dinner_party training_a_puppy painting_a_bedroom
        studying_for_exams planting_roses moving_to_a_new_flat making_pizza_dough running_a_yard_sale
        staying_warm_in_winter learning_to_skateboard writing_a_cover_letter decorating_a_small_room
        cooking_rice keeping_a_journal feeding_birds_in_winter planning_a_road_trip learning_chess_openings
        caring_for_an_old_dog cleaning_windows packing_a_suitcase shopping_for_shoes fixing_a_squeaky_door
        baking_cookies learning_to_meditate taking_better_photos_with_a_phone buying_a_used_car
        keeping_a_fridge_tidy making_a_budget hiking_in_the_rain brewing_coffee_at_home growing_herbs_indoors
        learning_to_dance speaking_in_public""",
    "how": """
        a_clock a_doorbell a_vacuum_cleaner a_calculator a_zipper a_thermometer a_piano a_telescope
        a_solar_panel a_battery a_windmill a_car_engine a_bridge a_canal_lock an_elevator a_sailboat
        a_hot_air_balloon a_washing_machine a_kite a_helicopter a_fountain_pen a_light_bulb a_microphone
        a_loudspeaker a_sewing_needle a_water_filter a_heat_pump a_satellite a_touch_screen a_padlock
        a_wristwatch a_rocket a_submarine an_oven a_blender""",
    "why": """
        the_moon_changes_shape we_dream salt_melts_ice the_sea_is_salty dogs_wag_their_tails milk_goes_sour
        popcorn_pops stars_twinkle we_blush metal_feels_cold snow_is_white some_birds_migrate
        we_get_goosebumps bubbles_are_round the_grass_is_wet_in_the_morning we_need_sleep
        fish_have_scales the_sun_is_hot clouds_float zebras_have_stripes paper_turns_yellow
        bananas_turn_brown we_sneeze cars_need_oil honey_never_spoils frogs_croak
        the_days_are_shorter_in_winter""",
    "write": """
        a_note_thanking_a_neighbour_for_help a_short_poem_about_the_sea an_email_asking_for_a_meeting
        a_message_wishing_a_friend_good_luck a_short_story_about_a_brave_mouse a_welcome_note_for_new_members
        a_reminder_about_a_club_meeting a_short_speech_for_a_wedding a_haiku_about_snow
        a_complaint_about_a_late_delivery a_note_to_a_landlord_about_a_broken_heater
        a_postcard_from_a_holiday_in_the_mountains a_product_description_for_a_wooden_table
        a_short_bio_for_a_conference a_farewell_message_for_a_colleague a_riddle_about_a_clock
        a_short_fable_about_a_fox_and_a_crow an_apology_for_a_late_reply a_toast_for_a_birthday_dinner
        a_short_story_about_a_robot_that_learns_to_paint""",
    "explain": """
        photosynthesis_to_a_child how_vaccines_are_tested what_a_budget_deficit_is how_memory_works
        what_an_algorithm_is how_a_bill_becomes_law what_a_recession_is how_bees_communicate
        what_a_spreadsheet_is how_compound_interest_works what_the_ozone_layer_does how_glaciers_move
        what_a_password_manager_does how_a_search_engine_ranks_pages what_an_operating_system_does
        how_fireworks_get_their_colours what_a_calorie_is how_a_credit_score_works what_an_eclipse_is
        how_plants_drink_water what_a_database_index_is how_the_heart_pumps_blood""",
    "compare": """
        a_bee_and_a_wasp a_rabbit_and_a_hare a_sea_and_an_ocean butter_and_margarine a_flute_and_a_clarinet
        a_laptop_and_a_tablet rain_and_drizzle a_fork_and_a_spoon a_bus_and_a_tram a_lion_and_a_tiger
        a_fruit_and_a_vegetable a_poem_and_a_story a_shop_and_a_market a_wolf_and_a_dog
        a_list_and_a_tuple_in_Python a_crab_and_a_lobster a_hurricane_and_a_tornado a_moth_and_a_butterfly""",
    "advice": """
        wake_up_earlier eat_more_vegetables spend_less_time_on_my_phone keep_my_desk_tidy
        learn_to_cook_simple_meals stay_motivated_to_exercise get_along_with_a_difficult_colleague
        prepare_for_a_long_flight make_a_good_first_impression keep_plants_alive_on_holiday
        be_more_patient_with_children write_a_good_essay take_care_of_my_back_at_work
        stop_biting_my_nails learn_new_words_every_day organise_my_photos""",
    "plan": """
        learning_to_play_the_piano a_week_of_healthy_dinners training_for_a_ten_kilometre_run
        spring_cleaning_a_flat learning_Spanish_in_six_months a_family_camping_weekend
        a_study_schedule_for_final_exams a_small_vegetable_patch_on_a_roof starting_a_podcast
        a_surprise_party_for_a_friend""",
    "qualities": """
        a_good_doctor a_good_story a_good_holiday a_good_kitchen a_good_book_cover a_good_website
        a_good_coach a_good_road_map a_good_interview_answer a_good_neighbourhood_cafe""",
}.items()}
WIDE_FORMS = {
    "tips": ["What are some tips for {x}?", "Give me three tips for {x}."],
    "how": ["How does {x} work?", "Explain how {x} works in simple terms."],
    "why": ["What is the reason that {x}?", "Can you explain why {x}?"],
    "write": ["Write {x}.", "Please write {x}."],
    "explain": ["Explain {x}.", "Can you explain {x} in a few sentences?"],
    "compare": ["What is the difference between {x}?", "Compare {x}."],
    "advice": ["How can I {x}?", "Any advice on how to {x}?"],
    "plan": ["Give me a plan for {x}.", "Make me a simple plan for {x}."],
    "qualities": ["What makes {x}?", "What are the qualities of {x}?"],
}
WIDE_PYTHON_TASKS = [
    "counts the words longer than five letters in a text", "returns the last n lines of a file",
    "checks whether a string is a valid hexadecimal number", "converts seconds to hours, minutes and seconds",
    "returns the characters that appear in both of two strings", "pads a number with leading zeros",
    "returns the indices of the largest value in a list", "replaces every vowel in a string with a star",
    "checks whether a number is a perfect number", "returns the sum of the even numbers in a list",
    "converts a string to snake case", "removes empty strings from a list", "returns the average word length",
    "builds a frequency table of the letters in a file", "checks whether a matrix is symmetric",
    "returns the nth triangular number", "merges two dictionaries, adding the values of shared keys",
    "finds pairs in a list that add up to a target", "counts the uppercase letters in a string",
    "returns a list without its smallest and largest values", "implements a countdown timer",
    "checks whether a word can be typed with one row of a keyboard", "converts a hex colour to RGB",
    "returns the words of a sentence sorted by length", "splits a full name into first and last names",
    "implements a simple to-do list class", "computes the area of a circle from its radius",
    "returns the common elements of three lists", "finds the first repeated character in a string",
    "encodes a string with a Caesar cipher", "checks whether a string is a pangram",
    "converts a list of words to a single sentence", "returns the initials of the words in a sentence",
    "implements a class for a rectangle with area and perimeter methods", "reads numbers from a file and sums them",
]
WIDE_PYTHON_FORMS = ["Write a Python function that {task}.", "How would you write a Python function that {task}?",
                     "Write a short Python function that {task}, with an example call."]
